/* The flow model's compiled run: the types and small helpers its two files share
 * (_flowsim.c: the module, flows starting and ending, ranks and steps; _flowsim_rates.c: the
 * flows' max-min rates).
 * The essay is at the top of _flowsim.c. */
#ifndef COLLOPS_FLOWSIM_H
#define COLLOPS_FLOWSIM_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Built with -DFLOWSIM_PROFILE, the run counts the repair's work and times its phases (CPU
 * cycles) and prints them to stderr at its end: the profile behind the layout. */
#ifdef FLOWSIM_PROFILE
#include <stdio.h>
#include <x86intrin.h>
extern struct FlowsimProfile {
    unsigned long long fills, first_u, later_u, touched, pushes, pops, held_scans,
    check_scans, stats, checks, join_a, join_fb, join_b, nobn, t_f[5], t_fill, t_check, t_set,
    t_update, t_total; } prof;
#define PROF_ADD(field, n) (prof.field += (unsigned long long)(n))
#define PROF_TICK(t) unsigned long long t = __rdtsc()
#define PROF_SINCE(field, t) (prof.field += __rdtsc() - (t))
#else
#define PROF_ADD(field, n) ((void)0)
#define PROF_TICK(t) ((void)0)
#define PROF_SINCE(field, t) ((void)0)
#endif
#define DRAINED 1e-9   /* flows whose drain times are this close end together */
#define TOLERANCE 1e-9 /* relative slack of "saturated" and "largest rate" in the check */
enum { ISSUED, ARRIVED, LOCAL_DONE };

/* fmin and fmax are library calls at -O2 (for their NaN rules); no value here is NaN */
static inline double min2(double a, double b) { return b < a ? b : a; }
static inline double max2(double a, double b) { return b > a ? b : a; }

typedef struct { int64_t *v; int64_t n, cap; } Vec;

static inline int vec_push(Vec *a, int64_t x) {
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 4;
        int64_t *v = realloc(a->v, sizeof(int64_t) * (size_t)cap);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* ---- binary heaps: timed events (time, sequence) and links by share (key, link) ---------- */
typedef struct { double time; int64_t seq, item; int what; } Event;
typedef struct { double key; int64_t link; } Keyed;  /* 16 bytes: four to a line */
typedef struct { Event *v; int64_t n, cap; } EventHeap;
typedef struct { Keyed *v; int64_t n, cap; } KeyedHeap;

static inline int event_before(const Event *x, const Event *y) {
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

#define HEAP_FUNCS(NAME, HEAP, T, LESS)                                                      \
    static inline int NAME##_push(HEAP *h, T e) {                                                \
        if (h->n == h->cap) {                                                                \
            int64_t cap = h->cap ? 2 * h->cap : 64;                                          \
            T *v = realloc(h->v, sizeof(T) * (size_t)cap);                                   \
            if (!v) return -1;                                                               \
            h->v = v;                                                                        \
            h->cap = cap;                                                                    \
        }                                                                                    \
        int64_t i = h->n++;                                                                  \
        while (i > 0) {                                                                      \
            int64_t parent = (i - 1) / 2;                                                    \
            if (!LESS(&e, &h->v[parent])) break;                                             \
            h->v[i] = h->v[parent];                                                          \
            i = parent;                                                                      \
        }                                                                                    \
        h->v[i] = e;                                                                         \
        return 0;                                                                            \
    }                                                                                        \
    static inline T NAME##_pop(HEAP *h) {                                                        \
        T top = h->v[0], last = h->v[--h->n];                                                \
        int64_t i = 0;                                                                       \
        for (;;) {                                                                           \
            int64_t child = 2 * i + 1;                                                       \
            if (child >= h->n) break;                                                        \
            if (child + 1 < h->n && LESS(&h->v[child + 1], &h->v[child])) ++child;           \
            if (!LESS(&h->v[child], &last)) break;                                           \
            h->v[i] = h->v[child];                                                           \
            i = child;                                                                       \
        }                                                                                    \
        if (h->n > 0) h->v[i] = last;                                                        \
        return top;                                                                          \
    }

static inline int keyed_before(const Keyed *x, const Keyed *y) { return x->key < y->key; }
HEAP_FUNCS(events, EventHeap, Event, event_before)
HEAP_FUNCS(keyed, KeyedHeap, Keyed, keyed_before)

static inline int step_before(const int64_t *x, const int64_t *y) { return *x < *y; }
typedef struct { int64_t *v; int64_t n, cap; } StepHeap;
HEAP_FUNCS(steps, StepHeap, int64_t, step_before)

/* A rank's ready sends, taken smallest step first: a run of steps that became ready in
 * increasing order (a queue, O(1) each: the usual case, sends ready in schedule order) beside
 * a heap of those that came out of order. */
typedef struct { Vec run; int64_t head; StepHeap heap; } Pending;

static inline int pending_push(Pending *q, int64_t step) {
    if (q->head == q->run.n) q->head = q->run.n = 0;
    if (q->run.n == 0 || step > q->run.v[q->run.n - 1]) return vec_push(&q->run, step);
    return steps_push(&q->heap, step);
}

static inline int pending_empty(const Pending *q) {
    return q->head == q->run.n && q->heap.n == 0;
}

static inline int64_t pending_pop(Pending *q) {
    if (q->head < q->run.n && (q->heap.n == 0 || q->run.v[q->head] < q->heap.v[0]))
        return q->run.v[q->head++];
    return steps_pop(&q->heap);
}

/* The repair's cost is memory latency (a few thousand flows and links visited per update at
 * 4096 ranks), so its data is laid out for it. What the repair reads of every flow on a link
 * it visits (rate, marks, bottleneck) is a 32-byte record in an array of its own, a few
 * hundred kilobytes that stay in the L2 cache; the rest of a flow (bytes left, message) and
 * its route (copied in when it starts), read only for the flows being re-filled, are in a
 * second record, the route right after a 32-byte head. */
typedef struct {
    double rate, new;                   /* current rate; U's rate being filled */
    int32_t mark, checked, bottleneck;  /* epoch of U; stamp of the check; its link */
    char frozen;
} Hot;
_Static_assert(sizeof(Hot) == 32, "two flows' hot fields to a cache line");
typedef struct {
    double left, time;   /* bytes left at time */
    int32_t msg, hops;   /* its message; links on its route */
} Flow;
#define FLOW_HEAD 32

/* A link's record: two cache lines, 128-byte aligned (fetched as a pair), with its first
 * LINK_INLINE member flows inside; once more cross it they all move to `spill`. */
#define LINK_INLINE 8
typedef struct {
    int32_t count, stat_mark;  /* U's flows on it; the check's stamp */
    int32_t held_update, held_count, n, cap;  /* the update and U's count at `held`; members */
    double sum;             /* its flows' rates, kept up as they change (see fill_u) */
    double left, held;      /* capacity left during the filling; left by the held flows */
    double usage, top;      /* the check's sum of rates and largest rate, as of stat_mark */
    double capacity, rate, time;  /* bytes/s; hot spots: its rate since time */
    int32_t *spill;
    int32_t inl[LINK_INLINE];
} Link;
_Static_assert(sizeof(Link) == 128, "a link is two cache lines");

/* When a link's load last changed: the epoch of the filling that re-filled a flow on it, the
 * update before which a flow left it. The check asks it of every held flow's bottleneck on
 * the links it visits, so it is an array of its own (8 bytes a link, in the L2 cache). */
typedef struct { int32_t mark, removed; } Changed;

static inline const int32_t *members(const Link *k) {
    return k->cap > LINK_INLINE ? k->spill : k->inl;
}

static inline int member_add(Link *k, int32_t g) {
    if (k->n == k->cap) {
        int32_t cap = 2 * k->cap;
        int32_t *v = k->cap > LINK_INLINE ? realloc(k->spill, sizeof(int32_t) * (size_t)cap)
                                          : malloc(sizeof(int32_t) * (size_t)cap);
        if (!v) return -1;
        if (k->cap == LINK_INLINE) memcpy(v, k->inl, sizeof(k->inl));
        k->spill = v;
        k->cap = cap;
    }
    (k->cap > LINK_INLINE ? k->spill : k->inl)[k->n++] = g;
    return 0;
}

static inline void member_remove(Link *k, int32_t g) {  /* swap-remove g */
    int32_t *v = k->cap > LINK_INLINE ? k->spill : k->inl;
    for (int32_t i = 0; i < k->n; ++i)
        if (v[i] == g) { v[i] = v[--k->n]; return; }
}

/* Flows by finish time, each at most once (its position kept), the earliest on top. */
typedef struct { double key; int64_t slot; } Due;
typedef struct { Due *v; int32_t *pos; int64_t n; } DueHeap;

static inline void due_place(DueHeap *h, int64_t i, Due e) {
    h->v[i] = e;
    h->pos[e.slot] = (int32_t)i;
}

static inline void due_sift(DueHeap *h, int64_t i, Due e) {
    while (i > 0 && e.key < h->v[(i - 1) / 2].key) {
        due_place(h, i, h->v[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && h->v[child + 1].key < h->v[child].key) ++child;
        if (!(h->v[child].key < e.key)) break;
        due_place(h, i, h->v[child]);
        i = child;
    }
    due_place(h, i, e);
}

/* room for every slot is there */
static inline void due_set(DueHeap *h, int64_t slot, double key) {
    Due e = {key, slot};
    due_sift(h, h->pos[slot] >= 0 ? h->pos[slot] : h->n++, e);
}

static inline void due_remove(DueHeap *h, int64_t slot) {
    int64_t i = h->pos[slot];
    if (i < 0) return;
    h->pos[slot] = -1;
    Due last = h->v[--h->n];
    if (i < h->n) due_sift(h, i, last);
}

/* ---- the simulation's state ---------------------------------------------------------------- */
typedef struct {
    /* the program (read only, but waiting) */
    const int64_t *kind, *step_bytes, *step_rank, *succ_ptr, *succ_idx, *msg_of_step;
    const int64_t *send_of_msg, *recv_of_msg, *roff;
    const int32_t *rlinks;
    const double *capacity, *latency, *wire;
    int64_t *waiting;
    double *msg_done;
    int64_t nlinks, send_kind, recv_kind, window;
    int refill_all;  /* re-fill every flow at every update (the check of the local repair) */
    double tolerance;  /* the check's relative slack: TOLERANCE, or the approximation's eps */
    int approx;        /* eps > 0: flows whose bottleneck stays saturated within eps are held */
    int audit;         /* after every update, every link's running sum against its flows' rates */
    double drift;      /* the largest difference the audit saw, relative to the link's capacity */
    double overhead, bandwidth, gamma;
    /* clock, ranks, timed events */
    double now, finished;
    int64_t steps_done, rate_updates, sequence, starts, refilled;
    EventHeap events;
    double *cpu_free;
    int64_t *in_flight;
    Pending *pending;
    /* flows in the network, by slot */
    int64_t nslots, nactive, maxhops;
    char *flows;     /* the flows' records, fstride bytes apart (FL) */
    Hot *hot;        /* their hot fields (HT) */
    size_t fstride;
    int64_t *f_start;
    Vec free_slots, added, removed_links, members_u, done;
    DueHeap finish;
    int stale;
    /* links */
    Link *ln;
    Changed *changed;
    int64_t epoch;  /* below INT32_MAX: the records keep 32-bit stamps */
    Vec touched;
    KeyedHeap fill;
    double *bound;  /* per link during a filling: the largest rate one of its flows may get */
    /* hot spots: rows (windows x links) of bytes, flows started per window */
    double *rows, *counts, width;
    int64_t nwindows;
} Sim;

#define FL(s, g) ((Flow *)((s)->flows + (size_t)(g) * (s)->fstride))
#define HT(s, g) (&(s)->hot[g])
#define EPOCHS_LEFT(s) ((s)->epoch < INT32_MAX - 4)
#define OVERFLOW (-3)

static inline int push_event(Sim *s, double time, int what, int64_t item) {
    Event e = {time, ++s->sequence, item, what};
    return events_push(&s->events, e);
}

/* A flow's route is copied after its record when it starts (at most maxhops links):
 * the repair then reads a few kilobytes of live routes, not the program's gigabyte of them. */
#define ROUTE(s, slot, p) for (int64_t p = 0; p < FL(s, slot)->hops; ++p)
#define HOP(s, slot, p) ((int64_t)((const int32_t *)((char *)FL(s, slot) + FLOW_HEAD))[p])

/* ---- hot spots ------------------------------------------------------------------------------ */
static inline void timeline_fit(Sim *s, double time) {
    while (time >= s->width * (double)s->nwindows) {
        int64_t half = s->nwindows / 2, nl = s->nlinks;
        for (int64_t w = 0; w < half; ++w) {
            for (int64_t l = 0; l < nl; ++l)
                s->rows[w * nl + l] = s->rows[2 * w * nl + l] + s->rows[(2 * w + 1) * nl + l];
            s->counts[w] = s->counts[2 * w] + s->counts[2 * w + 1];
        }
        memset(s->rows + half * nl, 0, sizeof(double) * (size_t)(half * nl));
        for (int64_t w = half; w < s->nwindows; ++w) s->counts[w] = 0.0;
        s->width *= 2;
    }
}

static inline void timeline_flush(Sim *s, int64_t l) {
    double start = s->ln[l].time, end = s->now, rate = s->ln[l].rate;
    s->ln[l].time = end;
    if (end <= start || rate == 0.0) return;
    timeline_fit(s, end);
    int64_t first = (int64_t)(start / s->width), last = (int64_t)(end / s->width);
    if (last > s->nwindows - 1) last = s->nwindows - 1;
    for (int64_t w = first; w <= last; ++w) {
        double lo = max2(start, (double)w * s->width), hi = min2(end, (double)(w + 1) * s->width);
        if (hi > lo) s->rows[w * s->nlinks + l] += rate * (hi - lo);
    }
}

/* ---- flows ------------------------------------------------------------------------------- */
static inline int set_rate(Sim *s, int64_t slot, double rate) {
    Flow *f = FL(s, slot);
    double old = HT(s, slot)->rate;
    f->left -= old * (s->now - f->time);
    f->time = s->now;
    HT(s, slot)->rate = rate;
    double left = f->left;
    double end = left > 0 ? (rate > 0 ? s->now + left / rate : INFINITY) : s->now;
    ROUTE(s, slot, p) {
        int64_t l = HOP(s, slot, p);
        timeline_flush(s, l);
        s->ln[l].rate += min2(rate, s->bandwidth) - min2(old, s->bandwidth);
        s->ln[l].sum += rate - old;
    }
    if (isinf(end)) due_remove(&s->finish, slot);
    else due_set(&s->finish, slot, end);
    return 0;
}

/* Across the two files, hidden from the module's exports. */
#define FLOWSIM_INTERNAL __attribute__((visibility("hidden")))
/* _flowsim_rates.c: the max-min rates of the flows in the network, repaired after a change */
FLOWSIM_INTERNAL int update_rates(Sim *s);

#endif
