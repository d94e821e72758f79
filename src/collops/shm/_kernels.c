/* collops.shm's reductions in numpy's arithmetic, element by element: compiled into both
 * `_direct` (the small calls' folds, `combine_into`) and `_stream` (a folding rank's reads,
 * see _stream.c), the one place they are written. */
#include "_kernels.h"

/* The folds are vectorised (the build's -O2 leaves these loops scalar, several times slower
 * than numpy's own loops); their operands never overlap. `fold_T`: out = out op in;
 * `combine_T`: out = a op b. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FOLD_FN __attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define FOLD_FN __attribute__((optimize("O3")))
#else
#define FOLD_FN
#endif

#define LOOPS_INT(T, UT, A, B)                                                            \
    Py_ssize_t i;                                                                         \
    switch (op) {                                                                         \
    case OP_SUM: for (i = 0; i < n; i++) out[i] = (T)((UT)A[i] + (UT)B[i]); break;        \
    case OP_PROD: for (i = 0; i < n; i++) out[i] = (T)((UT)A[i] * (UT)B[i]); break;       \
    case OP_MIN: for (i = 0; i < n; i++) out[i] = A[i] < B[i] ? A[i] : B[i]; break;       \
    case OP_MAX: for (i = 0; i < n; i++) out[i] = A[i] > B[i] ? A[i] : B[i]; break;       \
    case OP_BAND: for (i = 0; i < n; i++) out[i] = A[i] & B[i]; break;                    \
    case OP_BOR: for (i = 0; i < n; i++) out[i] = A[i] | B[i]; break;                     \
    case OP_BXOR: for (i = 0; i < n; i++) out[i] = A[i] ^ B[i]; break;                    \
    }

/* numpy's minimum/maximum on floats: the left operand when it is strictly smaller (larger)
 * or NaN, else the right one (so of two equal zeros the right one's sign wins) */
#define LOOPS_FLOAT(A, B)                                                                 \
    Py_ssize_t i;                                                                         \
    switch (op) {                                                                         \
    case OP_SUM: for (i = 0; i < n; i++) out[i] = A[i] + B[i]; break;                     \
    case OP_PROD: for (i = 0; i < n; i++) out[i] = A[i] * B[i]; break;                    \
    case OP_MIN:                                                                          \
        for (i = 0; i < n; i++)                                                           \
            out[i] = (A[i] < B[i] || isnan(A[i])) ? A[i] : B[i];                          \
        break;                                                                            \
    case OP_MAX:                                                                          \
        for (i = 0; i < n; i++)                                                           \
            out[i] = (A[i] > B[i] || isnan(A[i])) ? A[i] : B[i];                          \
        break;                                                                            \
    }

#define FOLD_INT(T, UT)                                                                   \
    static FOLD_FN void fold_##T(int op, T *restrict out, const T *restrict in,           \
                                 Py_ssize_t n) {                                          \
        LOOPS_INT(T, UT, out, in)                                                         \
    }                                                                                     \
    static FOLD_FN void combine_##T(int op, T *restrict out, const T *restrict a,         \
                                    const T *restrict b, Py_ssize_t n) {                  \
        LOOPS_INT(T, UT, a, b)                                                            \
    }

#define FOLD_FLOAT(T)                                                                     \
    static FOLD_FN void fold_##T(int op, T *restrict out, const T *restrict in,           \
                                 Py_ssize_t n) {                                          \
        LOOPS_FLOAT(out, in)                                                              \
    }                                                                                     \
    static FOLD_FN void combine_##T(int op, T *restrict out, const T *restrict a,         \
                                    const T *restrict b, Py_ssize_t n) {                  \
        LOOPS_FLOAT(a, b)                                                                 \
    }

FOLD_INT(int8_t, uint8_t)
FOLD_INT(int16_t, uint16_t)
FOLD_INT(int32_t, uint32_t)
FOLD_INT(int64_t, uint64_t)
FOLD_INT(uint8_t, uint8_t)
FOLD_INT(uint16_t, uint16_t)
FOLD_INT(uint32_t, uint32_t)
FOLD_INT(uint64_t, uint64_t)
FOLD_FLOAT(float)
FOLD_FLOAT(double)

const Py_ssize_t itemsize_of[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

void fold(int dtype, int op, void *out, const void *in, Py_ssize_t n) {
    switch (dtype) {
    case DT_I1: fold_int8_t(op, out, in, n); break;
    case DT_I2: fold_int16_t(op, out, in, n); break;
    case DT_I4: fold_int32_t(op, out, in, n); break;
    case DT_I8: fold_int64_t(op, out, in, n); break;
    case DT_U1: fold_uint8_t(op, out, in, n); break;
    case DT_U2: fold_uint16_t(op, out, in, n); break;
    case DT_U4: fold_uint32_t(op, out, in, n); break;
    case DT_U8: fold_uint64_t(op, out, in, n); break;
    case DT_F4: fold_float(op, out, in, n); break;
    case DT_F8: fold_double(op, out, in, n); break;
    }
}

/* out = a op b (`a` may be `out`: then `fold`). */
void combine(int dtype, int op, void *out, const void *a, const void *b, Py_ssize_t n) {
    if (out == a) {
        fold(dtype, op, out, b, n);
        return;
    }
    switch (dtype) {
    case DT_I1: combine_int8_t(op, out, a, b, n); break;
    case DT_I2: combine_int16_t(op, out, a, b, n); break;
    case DT_I4: combine_int32_t(op, out, a, b, n); break;
    case DT_I8: combine_int64_t(op, out, a, b, n); break;
    case DT_U1: combine_uint8_t(op, out, a, b, n); break;
    case DT_U2: combine_uint16_t(op, out, a, b, n); break;
    case DT_U4: combine_uint32_t(op, out, a, b, n); break;
    case DT_U8: combine_uint64_t(op, out, a, b, n); break;
    case DT_F4: combine_float(op, out, a, b, n); break;
    case DT_F8: combine_double(op, out, a, b, n); break;
    }
}

