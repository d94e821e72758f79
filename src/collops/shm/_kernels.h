/* collops.shm's reduction kernels (`_kernels.c`): the operator and dtype codes of
 * `collops.ops.compiled_kernel`, and the folds. */
#ifndef COLLOPS_SHM_KERNELS_H
#define COLLOPS_SHM_KERNELS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>

#define KERNELS_INTERNAL __attribute__((visibility("hidden")))

enum { OP_SUM = 0, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR };
enum { DT_I1 = 0, DT_I2, DT_I4, DT_I8, DT_U1, DT_U2, DT_U4, DT_U8, DT_F4, DT_F8 };

/* the item size of each DT_* dtype */
KERNELS_INTERNAL extern const Py_ssize_t itemsize_of[];
/* out = out op in, `n` items; the operands do not overlap */
KERNELS_INTERNAL void fold(int dtype, int op, void *out, const void *in, Py_ssize_t n);
/* out = a op b, `n` items (`a` may be `out`: then `fold`; no other overlap) */
KERNELS_INTERNAL void combine(int dtype, int op, void *out, const void *a, const void *b,
                              Py_ssize_t n);

#endif /* COLLOPS_SHM_KERNELS_H */
