/* The flow model's whole run, compiled: the twin of collops.sim.flow.FlowSimulation.
 *
 * run(...) executes a program (steps, messages, routes as arrays) exactly as the Python loop
 * does — the same timed events in the same (time, sequence) order, the same ranks, CPUs and
 * windows, flows that drain together within a relative 1e-9 ending together — and differs in
 * two ways that change nothing but the cost:
 *
 * - Flows drain lazily. A flow keeps (bytes left at time t, rate); its finish time sits in a
 *   heap and is renewed only when its rate changes, instead of every flow being advanced and
 *   scanned at every event.
 * - Max-min rates are repaired locally. After a wave of flows starting and ending, only a set
 *   U of flows is re-filled (the new flows and every flow sharing a link with an ended one),
 *   the others held at their rates. The result is then checked against the characterisation
 *   of max-min fairness (Bertsekas & Gallager: a feasible allocation is the max-min fair one
 *   iff every flow crosses a saturated link on which no flow has a larger rate): a flow of U
 *   without such a link brings in the held flows that outrank it on its saturated links, a
 *   held flow that lost its bottleneck joins U, and U is re-filled until the check passes.
 *   U can grow to every flow, the global filling, so the result is always the max-min
 *   allocation; in practice a change stays within a neighbourhood.
 *
 * Per-link bytes per time window (the hot spots) are accumulated lazily too: a link adds its
 * rate × elapsed time whenever its rate changes.
 *
 * The approximate repair (eps > 0, see collops.sim.flow.parse_maxmin) also keeps every link's
 * sum of its flows' rates as they change, and takes from it what the exact repair recomputes
 * by visiting the link's flows: the capacity the held flows leave (capacity − (sum − U's
 * rates on it)) and whether a link is saturated within eps before a filling. Only the rounding
 * differs (a test audits the sums against a recomputation after every update); the exact
 * repair keeps its visits, and so its results bit for bit. */
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
static struct { unsigned long long fills, first_u, later_u, touched, pushes, pops, held_scans,
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

static int vec_push(Vec *a, int64_t x) {
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

static int event_before(const Event *x, const Event *y) {
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

#define HEAP_FUNCS(NAME, HEAP, T, LESS)                                                      \
    static int NAME##_push(HEAP *h, T e) {                                                   \
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
    static T NAME##_pop(HEAP *h) {                                                           \
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

static int keyed_before(const Keyed *x, const Keyed *y) { return x->key < y->key; }
HEAP_FUNCS(events, EventHeap, Event, event_before)
HEAP_FUNCS(keyed, KeyedHeap, Keyed, keyed_before)

static int step_before(const int64_t *x, const int64_t *y) { return *x < *y; }
typedef struct { int64_t *v; int64_t n, cap; } StepHeap;
HEAP_FUNCS(steps, StepHeap, int64_t, step_before)

/* A rank's ready sends, taken smallest step first: a run of steps that became ready in
 * increasing order (a queue, O(1) each: the usual case, sends ready in schedule order) beside
 * a heap of those that came out of order. */
typedef struct { Vec run; int64_t head; StepHeap heap; } Pending;

static int pending_push(Pending *q, int64_t step) {
    if (q->head == q->run.n) q->head = q->run.n = 0;
    if (q->run.n == 0 || step > q->run.v[q->run.n - 1]) return vec_push(&q->run, step);
    return steps_push(&q->heap, step);
}

static int pending_empty(const Pending *q) { return q->head == q->run.n && q->heap.n == 0; }

static int64_t pending_pop(Pending *q) {
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

static const int32_t *members(const Link *k) { return k->cap > LINK_INLINE ? k->spill : k->inl; }

static int member_add(Link *k, int32_t g) {
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

static void member_remove(Link *k, int32_t g) {  /* swap-remove g */
    int32_t *v = k->cap > LINK_INLINE ? k->spill : k->inl;
    for (int32_t i = 0; i < k->n; ++i)
        if (v[i] == g) { v[i] = v[--k->n]; return; }
}

/* Flows by finish time, each at most once (its position kept), the earliest on top. */
typedef struct { double key; int64_t slot; } Due;
typedef struct { Due *v; int32_t *pos; int64_t n; } DueHeap;

static void due_place(DueHeap *h, int64_t i, Due e) {
    h->v[i] = e;
    h->pos[e.slot] = (int32_t)i;
}

static void due_sift(DueHeap *h, int64_t i, Due e) {
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

static void due_set(DueHeap *h, int64_t slot, double key) {  /* room for every slot is there */
    Due e = {key, slot};
    due_sift(h, h->pos[slot] >= 0 ? h->pos[slot] : h->n++, e);
}

static void due_remove(DueHeap *h, int64_t slot) {
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

static int push_event(Sim *s, double time, int what, int64_t item) {
    Event e = {time, ++s->sequence, item, what};
    return events_push(&s->events, e);
}

/* ---- hot spots ------------------------------------------------------------------------------ */
static void timeline_fit(Sim *s, double time) {
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

static void timeline_flush(Sim *s, int64_t l) {
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

/* ---- flows ------------------------------------------------------------------------------------ */
/* A flow's route is copied after its record when it starts (at most maxhops links):
 * the repair then reads a few kilobytes of live routes, not the program's gigabyte of them. */
#define ROUTE(s, slot, p) for (int64_t p = 0; p < FL(s, slot)->hops; ++p)
#define HOP(s, slot, p) ((int64_t)((const int32_t *)((char *)FL(s, slot) + FLOW_HEAD))[p])

static int set_rate(Sim *s, int64_t slot, double rate) {
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

static int grow_slots(Sim *s) {
    int64_t n = s->nslots ? 2 * s->nslots : 1024;
    if (n > INT32_MAX) return -1;
    char *flows = aligned_alloc(64, (size_t)n * s->fstride);
    int64_t *start = realloc(s->f_start, sizeof(int64_t) * (size_t)n);
    if (start) s->f_start = start;
    Hot *hot = aligned_alloc(64, sizeof(Hot) * (size_t)n);  /* whole records to a line */
    Due *due = realloc(s->finish.v, sizeof(Due) * (size_t)n);
    if (due) s->finish.v = due;
    int32_t *pos = realloc(s->finish.pos, sizeof(int32_t) * (size_t)n);
    if (pos) s->finish.pos = pos;
    if (!flows || !start || !hot || !due || !pos) { free(flows); free(hot); return -1; }
    if (s->flows) memcpy(flows, s->flows, (size_t)s->nslots * s->fstride);
    if (s->hot) memcpy(hot, s->hot, sizeof(Hot) * (size_t)s->nslots);
    free(s->flows);
    free(s->hot);
    s->flows = flows;
    s->hot = hot;
    for (int64_t i = n - 1; i >= s->nslots; --i) {
        s->f_start[i] = -1;
        s->finish.pos[i] = -1;
        memset(FL(s, i), 0, sizeof(Flow));
        memset(HT(s, i), 0, sizeof(Hot));
        HT(s, i)->mark = HT(s, i)->checked = -1;
        if (vec_push(&s->free_slots, i) < 0) return -1;
    }
    s->nslots = n;
    return 0;
}

static int start_flow(Sim *s, int64_t msg) {
    if (s->free_slots.n == 0 && grow_slots(s) < 0) return -1;
    int64_t slot = s->free_slots.v[--s->free_slots.n];
    Flow *f = FL(s, slot);
    f->msg = (int32_t)msg;
    f->hops = (int32_t)(s->roff[msg + 1] - s->roff[msg]);
    memcpy((char *)f + FLOW_HEAD, s->rlinks + s->roff[msg], sizeof(int32_t) * (size_t)f->hops);
    f->left = s->wire[msg];
    HT(s, slot)->rate = 0.0;
    f->time = s->now;
    s->f_start[slot] = s->starts++;
    ++s->nactive;
    ROUTE(s, slot, p) if (member_add(&s->ln[HOP(s, slot, p)], (int32_t)slot) < 0) return -1;
    s->stale = 1;
    timeline_fit(s, s->now);
    s->counts[(int64_t)(s->now / s->width)] += 1.0;
    return vec_push(&s->added, slot);
}

static int end_flow(Sim *s, int64_t slot) {
    ROUTE(s, slot, p) {
        int64_t l = HOP(s, slot, p);
        member_remove(&s->ln[l], (int32_t)slot);
        timeline_flush(s, l);
        s->ln[l].rate -= min2(HT(s, slot)->rate, s->bandwidth);
        s->ln[l].sum -= HT(s, slot)->rate;
        if (s->ln[l].n == 0) s->ln[l].rate = s->ln[l].sum = 0.0;
        if (s->changed[l].removed != s->rate_updates) {
            s->changed[l].removed = (int32_t)s->rate_updates;
            if (vec_push(&s->removed_links, l) < 0) return -1;
        }
    }
    due_remove(&s->finish, slot);
    s->f_start[slot] = -1;
    --s->nactive;
    s->stale = 1;
    return vec_push(&s->free_slots, slot);
}

/* ---- max-min rates, repaired locally ---------------------------------------------------------- */
static int in_u(const Sim *s, int64_t g) { return HT(s, g)->mark == s->epoch; }
static double rate_of(const Sim *s, int64_t g) {
    return in_u(s, g) ? HT(s, g)->new : HT(s, g)->rate;
}

/* A flow joins U for the next filling (marked epoch + 1: until then it counts as held). */
static int join_u(Sim *s, int64_t g) {
    if (HT(s, g)->mark >= s->epoch) return 0;
    HT(s, g)->mark = s->epoch + 1;
    return vec_push(&s->members_u, g);
}

static double share_of(const Sim *s, int64_t l) {
    return (s->ln[l].left > 0 ? s->ln[l].left : 0.0) / (double)s->ln[l].count;
}

/* Progressive filling of U's flows over the capacity the held flows leave. */
static int fill_u(Sim *s) {
    PROF_ADD(fills, 1);
    PROF_TICK(t0);
    ++s->epoch;  /* a new epoch for links; U's marks are moved along */
    if (!EPOCHS_LEFT(s)) return OVERFLOW;
    for (int64_t k = 0; k < s->members_u.n; ++k) HT(s, s->members_u.v[k])->mark = (int32_t)s->epoch;
    /* the links' records are fetched all at once: the misses overlap */
    for (int64_t k = 0; k < s->members_u.n; ++k) {
        int64_t g = s->members_u.v[k];
        ROUTE(s, g, p) __builtin_prefetch(&s->ln[HOP(s, g, p)], 1, 3);
    }
    s->touched.n = 0;
    for (int64_t k = 0; k < s->members_u.n; ++k) {
        int64_t g = s->members_u.v[k];
        HT(s, g)->frozen = 0;
        ROUTE(s, g, p) {
            int64_t l = HOP(s, g, p);
            if (s->changed[l].mark != s->epoch) {
                s->changed[l].mark = (int32_t)s->epoch;
                s->ln[l].count = 0;
                s->ln[l].left = 0.0;  /* until the filling: U's rates on it */
                if (vec_push(&s->touched, l) < 0) return -1;
                PROF_ADD(touched, 1);
            }
            ++s->ln[l].count;
            s->ln[l].left += HT(s, g)->rate;
        }
    }
    s->fill.n = 0;
    PROF_SINCE(t_f[0], t0);
    PROF_TICK(t1);
    for (int64_t k = 0; k < s->touched.n; ++k) {
        int64_t l = s->touched.v[k];
        Link *link = &s->ln[l];
        /* U only grows during an update: the same count on a link is the same held flows */
        if (s->approx) {  /* from the running sum: no visit of the held flows */
            link->held = link->count == link->n ? link->capacity
                                                : link->capacity - (link->sum - link->left);
        } else if (link->held_update != s->rate_updates || link->held_count != link->count) {
            double left = s->ln[l].capacity;
            PROF_ADD(held_scans, link->n);
            const int32_t *m = members(link);
            for (int32_t i = 0; i < link->n; ++i) {
                int64_t g = m[i];
                if (!in_u(s, g)) left -= HT(s, g)->rate;
            }
            link->held = left;
            link->held_update = (int32_t)s->rate_updates;
            link->held_count = link->count;
        }
        link->left = link->held;
        s->bound[l] = s->approx ? 0.0 : INFINITY;
    }
    PROF_SINCE(t_f[1], t1);
    PROF_TICK(t2);
    /* A flow's rate is at most the least capacity the held flows leave on its route; a link
     * whose share starts above that bound for each of its flows never freezes one (each
     * freezes first on its least link, whose share stays below the bound), so it can be left
     * out of the heap. Only the approximation does: the heap's order among equal shares fixes
     * the exact repair's rounding, and fewer entries reorder them. */
    for (int64_t k = 0; s->approx && k < s->members_u.n; ++k) {
        int64_t g = s->members_u.v[k];
        double most = INFINITY;
        ROUTE(s, g, p) most = min2(most, max2(s->ln[HOP(s, g, p)].held, 0.0));
        ROUTE(s, g, p) {
            int64_t l = HOP(s, g, p);
            if (most > s->bound[l]) s->bound[l] = most;
        }
    }
    PROF_SINCE(t_f[2], t2);
    PROF_TICK(t3);
    for (int64_t k = 0; k < s->touched.n; ++k) {
        int64_t l = s->touched.v[k];
        Keyed e = {share_of(s, l), l};
        if (e.key <= s->bound[l] && keyed_push(&s->fill, e) < 0) return -1;
        PROF_ADD(pushes, e.key <= s->bound[l]);
    }
    PROF_SINCE(t_f[3], t3);
    PROF_TICK(t4);
    double level = 0.0;
    while (s->fill.n > 0) {
        Keyed e = keyed_pop(&s->fill);
        PROF_ADD(pops, 1);
        int64_t l = e.link;
        if (s->ln[l].count == 0) continue;
        double share = share_of(s, l);
        if (share > e.key) {  /* its share grew since it was pushed: back in at the new one */
            Keyed again = {share, l};
            if (keyed_push(&s->fill, again) < 0) return -1;
            continue;
        }
        if (share > level) level = share;
        const int32_t *m = members(&s->ln[l]);
        for (int32_t i = 0; i < s->ln[l].n; ++i) {
            int64_t g = m[i];
            if (!in_u(s, g) || HT(s, g)->frozen) continue;
            HT(s, g)->frozen = 1;
            HT(s, g)->new = level;
            HT(s, g)->bottleneck = (int32_t)l;
            ROUTE(s, g, p) {
                s->ln[HOP(s, g, p)].left -= level;
                --s->ln[HOP(s, g, p)].count;
            }
        }
    }
    PROF_SINCE(t_f[4], t4);
    return 0;
}

static void link_stats(Sim *s, int64_t l, int64_t stamp) {
    if (s->ln[l].stat_mark == stamp) return;
    s->ln[l].stat_mark = (int32_t)stamp;
    PROF_ADD(stats, 1);
    double usage = 0.0, top = 0.0;
    const int32_t *m = members(&s->ln[l]);
    for (int32_t i = 0; i < s->ln[l].n; ++i) {
        double r = rate_of(s, m[i]);
        usage += r;
        if (r > top) top = r;
    }
    s->ln[l].usage = usage;
    s->ln[l].top = top;
}

static int saturated(const Sim *s, int64_t l) {
    return s->ln[l].usage >= s->ln[l].capacity * (1.0 - s->tolerance);
}

/* Saturated within eps by its flows' current rates: the approximation's running sum. */
static int saturated_now(const Sim *s, int64_t l) {
    return s->ln[l].sum >= s->ln[l].capacity * (1.0 - s->tolerance);
}

static int is_bottleneck(Sim *s, int64_t l, double rate, int64_t stamp) {
    link_stats(s, l, stamp);
    return saturated(s, l) && rate >= s->ln[l].top * (1.0 - s->tolerance);
}

/* Whether flow g crosses a saturated link where no flow has a larger rate (recorded). */
static int has_bottleneck(Sim *s, int64_t g, int64_t stamp) {
    PROF_ADD(checks, 1);
    double r = rate_of(s, g);
    if (is_bottleneck(s, HT(s, g)->bottleneck, r, stamp)) return 1;
    ROUTE(s, g, p) {
        int64_t l = HOP(s, g, p);
        if (is_bottleneck(s, l, r, stamp)) { HT(s, g)->bottleneck = (int32_t)l; return 1; }
    }
    return 0;
}

/* The max-min check of U's filling; returns the number of flows that joined U (-1: memory). */
static int64_t check_u(Sim *s) {
    int64_t stamp = s->epoch, before = s->members_u.n;
    for (int64_t k = 0; k < before; ++k) {
        int64_t u = s->members_u.v[k];
        if (has_bottleneck(s, u, stamp)) continue;
        PROF_ADD(nobn, 1);
        double r = HT(s, u)->new;
        int64_t joined = 0;
        ROUTE(s, u, p) {
            int64_t l = HOP(s, u, p);
            if (!saturated(s, l)) continue;
            const int32_t *m = members(&s->ln[l]);
            for (int32_t i = 0; i < s->ln[l].n; ++i) {
                int64_t h = m[i];
                if (!in_u(s, h) && HT(s, h)->rate > r * (1.0 + s->tolerance)) {
                    if (join_u(s, h) < 0) return -1;
                    PROF_ADD(join_a, 1);
                    ++joined;
                }
            }
        }
        if (joined == 0) {  /* cannot happen for an exact filling; take its neighbours */
            PROF_ADD(join_fb, 1);
            ROUTE(s, u, p) {
                int64_t l = HOP(s, u, p);
                const int32_t *m = members(&s->ln[l]);
                for (int32_t i = 0; i < s->ln[l].n; ++i)
                    if (join_u(s, m[i]) < 0) return -1;
            }
        }
    }
    /* held flows on the links whose load changed: U's and those flows left */
    for (int64_t k = 0; k < s->touched.n + s->removed_links.n; ++k) {
        int64_t l = k < s->touched.n ? s->touched.v[k] : s->removed_links.v[k - s->touched.n];
        const int32_t *m = members(&s->ln[l]);
        PROF_ADD(check_scans, s->ln[l].n);
        for (int32_t i = 0; i < s->ln[l].n; ++i) {
            int64_t g = m[i];
            if (HT(s, g)->mark >= s->epoch || HT(s, g)->checked == stamp) continue;
            HT(s, g)->checked = (int32_t)stamp;
            int64_t b = HT(s, g)->bottleneck;  /* a bottleneck whose load did not change holds */
            if (s->changed[b].mark != s->epoch && s->changed[b].removed != s->rate_updates)
                continue;
            if (!has_bottleneck(s, g, stamp)) {
                PROF_ADD(join_b, 1);
                if (join_u(s, g) < 0) return -1;
            }
        }
    }
    return s->members_u.n - before;
}

static int join_all(Sim *s) {  /* every flow in the network that crosses a link */
    for (int64_t g = 0; g < s->nslots; ++g)
        if (s->f_start[g] >= 0 && FL(s, g)->hops > 0
                && join_u(s, g) < 0)
            return -1;
    return 0;
}

/* A new flow on a saturated link takes its share from the flows above that share: the check
 * would bring them in after a first filling without them, so the approximation takes them at
 * once (links saturated within eps, rates above the equal share by more than eps). */
static int join_outranking(Sim *s, int64_t g) {
    ROUTE(s, g, p) {
        int64_t l = HOP(s, g, p);
        if (!saturated_now(s, l)) continue;
        double share = s->ln[l].capacity / (double)s->ln[l].n * (1.0 + s->tolerance);
        const int32_t *m = members(&s->ln[l]);
        for (int32_t i = 0; i < s->ln[l].n; ++i)
            if (HT(s, m[i])->rate > share && join_u(s, m[i]) < 0) return -1;
    }
    return 0;
}

/* The running sums recomputed from scratch (tests: `flow_compiled.run(..., sum_drift=...)`). */
static void audit_sums(Sim *s) {
    for (int64_t l = 0; l < s->nlinks; ++l) {
        double sum = 0.0;
        const int32_t *m = members(&s->ln[l]);
        for (int32_t i = 0; i < s->ln[l].n; ++i) sum += HT(s, m[i])->rate;
        double drift = fabs(s->ln[l].sum - sum) / s->ln[l].capacity;
        if (!(drift <= s->drift)) s->drift = drift;  /* NaN too */
    }
}

static int update_rates(Sim *s) {
    s->epoch += 2;  /* past every mark of the last update */
    if (!EPOCHS_LEFT(s)) return OVERFLOW;
    s->members_u.n = 0;
    for (int64_t k = 0; k < s->added.n; ++k) {
        int64_t g = s->added.v[k];
        if (FL(s, g)->hops == 0) {
            if (set_rate(s, g, s->bandwidth) < 0) return -1;  /* on one node: unbounded */
        } else if (join_u(s, g) < 0 || (s->approx && join_outranking(s, g) < 0)) {
            return -1;
        }
    }
    for (int64_t k = 0; k < s->removed_links.n; ++k) {  /* who may gain where flows left */
        int64_t l = s->removed_links.v[k];
        if (s->approx && saturated_now(s, l)) continue;  /* still saturated within eps */
        const int32_t *m = members(&s->ln[l]);
        for (int32_t i = 0; i < s->ln[l].n; ++i) {
            int64_t g = m[i];
            if (HT(s, g)->bottleneck == l && join_u(s, g) < 0) return -1;
        }
    }
    s->added.n = 0;
    if (s->refill_all && join_all(s) < 0) return -1;
    s->stale = 0;
    int64_t before = s->refilled;
    (void)before;
    while (s->members_u.n > 0) {
        if (s->refilled == before) PROF_ADD(first_u, s->members_u.n);
        else PROF_ADD(later_u, s->members_u.n);
        PROF_TICK(t_fill);
        int rc = fill_u(s);
        PROF_SINCE(t_fill, t_fill);
        if (rc < 0) return rc;
        s->refilled += s->members_u.n;
        if (s->refill_all) break;  /* every flow was filled: nothing to check */
        PROF_TICK(t_check);
        int64_t joined = check_u(s);
        PROF_SINCE(t_check, t_check);
        if (joined < 0) return -1;
        if (joined == 0) break;
        /* most flows may change: fill them all at once rather than widen U step by step */
        if (2 * s->members_u.n > s->nactive && join_all(s) < 0) return -1;
    }
    PROF_TICK(t_set);
    for (int64_t k = 0; k < s->members_u.n; ++k) {
        int64_t g = s->members_u.v[k];
        if (HT(s, g)->new != HT(s, g)->rate)
            if (set_rate(s, g, HT(s, g)->new) < 0) return -1;
    }
    PROF_SINCE(t_set, t_set);
    s->removed_links.n = 0;
    ++s->rate_updates;  /* also the stamp of the links flows leave before the next update */
    if (s->audit) audit_sums(s);
    return 0;
}

/* ---- ranks and steps (as collops.sim.ranks.WindowedRanks) ------------------------------------ */
static int ready(Sim *s, int64_t step);

static int issue(Sim *s, int64_t rank) {
    Pending *pending = &s->pending[rank];
    while (!pending_empty(pending) && (s->window == 0 || s->in_flight[rank] < s->window)) {
        int64_t step = pending_pop(pending);
        ++s->in_flight[rank];
        s->cpu_free[rank] = max2(s->now, s->cpu_free[rank]) + s->overhead;
        if (push_event(s, s->cpu_free[rank], ISSUED, step) < 0) return -1;
    }
    return 0;
}

static int complete(Sim *s, int64_t step) {
    ++s->steps_done;
    if (s->now > s->finished) s->finished = s->now;
    for (int64_t i = s->succ_ptr[step]; i < s->succ_ptr[step + 1]; ++i) {
        int64_t next = s->succ_idx[i];
        if (--s->waiting[next] == 0 && ready(s, next) < 0) return -1;
    }
    return 0;
}

static int ready(Sim *s, int64_t step) {
    int64_t rank = s->step_rank[step];
    if (s->kind[step] == s->send_kind) {
        if (pending_push(&s->pending[rank], step) < 0) return -1;
        return issue(s, rank);
    }
    if (s->kind[step] == s->recv_kind) return complete(s, step);
    double start = max2(s->now, s->cpu_free[rank]);
    s->cpu_free[rank] = start + (double)s->step_bytes[step] * s->gamma;
    return push_event(s, s->cpu_free[rank], LOCAL_DONE, step);
}

static int arrived(Sim *s, int64_t msg) {
    s->msg_done[msg] = s->now;
    if (s->now > s->finished) s->finished = s->now;
    int64_t rank = s->step_rank[s->send_of_msg[msg]];
    --s->in_flight[rank];
    if (issue(s, rank) < 0) return -1;
    int64_t recv = s->recv_of_msg[msg];
    if (--s->waiting[recv] == 0) return ready(s, recv);
    return 0;
}

static int handle_due(Sim *s) {
    while (s->events.n > 0 && s->events.v[0].time <= s->now) {
        Event e = events_pop(&s->events);
        int rc = 0;
        if (e.what == ISSUED) {
            rc = start_flow(s, s->msg_of_step[e.item]);
            if (rc == 0) rc = complete(s, e.item);  /* a send's successors wait for its issue */
        } else if (e.what == ARRIVED) rc = arrived(s, e.item);
        else rc = complete(s, e.item);
        if (rc < 0) return -1;
    }
    return 0;
}

static int by_start(const void *x, const void *y, void *arg) {
    const Sim *s = arg;
    int64_t a = s->f_start[*(const int64_t *)x], b = s->f_start[*(const int64_t *)y];
    return (a > b) - (a < b);
}

/* The flows that drain first (and those within DRAINED of them) leave their source. */
static int drain_first(Sim *s, double soonest) {
    double start = s->now, limit = soonest * (1.0 + DRAINED);
    s->done.n = 0;
    while (s->finish.n > 0) {
        Due top = s->finish.v[0];
        if (top.key - start > limit) break;
        due_remove(&s->finish, top.slot);
        if (vec_push(&s->done, top.slot) < 0) return -1;
    }
    qsort_r(s->done.v, (size_t)s->done.n, sizeof(int64_t), by_start, s);
    s->now = start + soonest;
    for (int64_t k = 0; k < s->done.n; ++k) {
        int64_t slot = s->done.v[k], msg = FL(s, slot)->msg;
        if (push_event(s, s->now + s->latency[msg], ARRIVED, msg) < 0) return -1;
        if (end_flow(s, slot) < 0) return -1;
    }
    return 0;
}

static int simulate(Sim *s, int64_t nsteps, PyObject *progress) {
    /* the steps ready at the start, in order: as READY events at time 0 they would come
     * before every event they cause, so they are handled at once (no heap of them all) */
    for (int64_t step = 0; step < nsteps; ++step)
        if (s->waiting[step] == 0 && ready(s, step) < 0) return -1;
    int64_t turns = 0;
    while (s->events.n > 0 || s->nactive > 0) {
        if (s->events.n > 0 && s->events.v[0].time <= s->now) {
            if (handle_due(s) < 0) return -1;
            continue;
        }
        if (s->stale) {
            PROF_TICK(t_update);
            int rc = update_rates(s);
            PROF_SINCE(t_update, t_update);
            if (rc < 0) return rc;
        }
        double next_event = s->events.n > 0 ? s->events.v[0].time : INFINITY;
        double soonest = INFINITY;
        if (s->nactive > 0 && s->finish.n > 0) soonest = max2(0.0, s->finish.v[0].key - s->now);
        if (s->nactive > 0 && s->now + soonest <= next_event && !isinf(soonest)) {
            if (drain_first(s, soonest) < 0) return -1;
        } else if (!isinf(next_event)) {
            s->now = next_event;
            if (handle_due(s) < 0) return -1;
        } else {
            break;  /* flows that never drain: the caller reports the stall */
        }
        if (progress != Py_None && (++turns & 0xffff) == 0) {
            PyObject *r = PyObject_CallFunction(progress, "LLLL", (long long)s->steps_done,
                                                (long long)nsteps, (long long)s->rate_updates,
                                                (long long)s->refilled);
            if (!r) return -2;
            Py_DECREF(r);
        }
    }
    for (int64_t l = 0; l < s->nlinks; ++l) timeline_flush(s, l);
    return 0;
}

static void release(Sim *s, int64_t nranks) {
    free(s->waiting); free(s->events.v); free(s->cpu_free); free(s->in_flight);
    if (s->pending)
        for (int64_t r = 0; r < nranks; ++r) {
            free(s->pending[r].run.v);
            free(s->pending[r].heap.v);
        }
    free(s->pending);
    free(s->flows); free(s->hot); free(s->f_start);
    free(s->free_slots.v); free(s->added.v); free(s->removed_links.v); free(s->members_u.v);
    free(s->done.v); free(s->finish.v); free(s->finish.pos); free(s->touched.v); free(s->fill.v);
    if (s->ln)
        for (int64_t l = 0; l < s->nlinks; ++l)
            if (s->ln[l].cap > LINK_INLINE) free(s->ln[l].spill);
    free(s->ln);
    free(s->bound);
    free(s->changed);
}

#define NBUF 17
static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b[NBUF];
    long long nranks, window, send_kind, recv_kind;
    int refill_all = 0, audit = 0;
    double overhead, bandwidth, gamma, width, eps = 0.0;
    PyObject *progress;
    memset(b, 0, sizeof(b));
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*LLdddLLdO|pdp",
                          &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9],
                          &b[10], &b[11], &b[12], &b[13], &b[14], &b[15], &b[16], &nranks,
                          &window, &overhead, &bandwidth, &gamma, &send_kind, &recv_kind,
                          &width, &progress, &refill_all, &eps, &audit))
        return NULL;
    if (!(eps >= 0.0 && eps < 1.0)) {
        PyErr_SetString(PyExc_ValueError, "eps must be in [0, 1)");
        return NULL;
    }
    Sim s;
    memset(&s, 0, sizeof(s));
    PyObject *result = NULL;
    int64_t nsteps = b[0].len / 8;
    s.kind = b[0].buf; s.step_bytes = b[1].buf; s.step_rank = b[2].buf; s.succ_ptr = b[3].buf;
    s.succ_idx = b[4].buf; s.msg_of_step = b[6].buf; s.send_of_msg = b[7].buf;
    s.recv_of_msg = b[8].buf; s.roff = b[9].buf; s.rlinks = b[10].buf; s.capacity = b[11].buf;
    s.latency = b[12].buf; s.wire = b[13].buf; s.msg_done = b[14].buf; s.rows = b[15].buf;
    s.counts = b[16].buf;
    s.nlinks = b[11].len / 8;
    s.nwindows = b[16].len / 8;
    s.window = window; s.overhead = overhead; s.bandwidth = bandwidth; s.gamma = gamma;
    s.send_kind = send_kind; s.recv_kind = recv_kind; s.width = width;
    s.epoch = 0;
    s.refill_all = refill_all;
    s.audit = audit;
    s.approx = eps > 0.0;
    s.tolerance = s.approx ? eps : TOLERANCE;
    int64_t nmsgs = b[7].len / 8;
    if (b[5].len / 8 != nsteps || b[15].len / 8 != s.nwindows * s.nlinks
            || b[9].len / 8 != nmsgs + 1 || b[10].len / 4 != s.roff[nmsgs]) {  /* int32 links */
        PyErr_SetString(PyExc_ValueError, "array lengths disagree");
        goto done;
    }
    if (nmsgs > INT32_MAX || s.nlinks > INT32_MAX) {  /* the records hold 32-bit ids */
        PyErr_SetString(PyExc_ValueError, "more than 2**31 messages or links");
        goto done;
    }
    s.waiting = malloc(sizeof(int64_t) * (size_t)(nsteps + 1));
    s.cpu_free = calloc((size_t)nranks + 1, sizeof(double));
    s.in_flight = calloc((size_t)nranks + 1, sizeof(int64_t));
    s.pending = calloc((size_t)nranks + 1, sizeof(Pending));
    s.ln = aligned_alloc(sizeof(Link), sizeof(Link) * ((size_t)s.nlinks + 1));
    s.bound = calloc((size_t)s.nlinks + 1, sizeof(double));
    s.changed = calloc((size_t)s.nlinks + 1, sizeof(Changed));
    if (!s.waiting || !s.cpu_free || !s.in_flight || !s.pending || !s.ln || !s.bound
            || !s.changed) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(s.waiting, b[5].buf, sizeof(int64_t) * (size_t)nsteps);
    for (int64_t m = 0; m < nmsgs; ++m)
        if (s.roff[m + 1] - s.roff[m] > s.maxhops) s.maxhops = s.roff[m + 1] - s.roff[m];
    s.fstride = (FLOW_HEAD + sizeof(int32_t) * (size_t)s.maxhops + 63) & ~(size_t)63;
    memset(s.ln, 0, sizeof(Link) * ((size_t)s.nlinks + 1));
    for (int64_t l = 0; l < s.nlinks; ++l) {
        Link *k = &s.ln[l];
        k->stat_mark = k->held_update = -1;
        s.changed[l].mark = s.changed[l].removed = -1;
        k->cap = LINK_INLINE;
        k->capacity = s.capacity[l];
    }
    PROF_TICK(t_total);
    int rc = simulate(&s, nsteps, progress);
    PROF_SINCE(t_total, t_total);
#ifdef FLOWSIM_PROFILE
    double u = (double)s.rate_updates;
    fprintf(stderr, "flowsim profile: %lld updates; per update: %.2f fillings, U %.1f first "
            "%.1f later, %.1f links touched, %.1f heap pushes %.1f pops, %.1f held scans, "
            "%.1f check scans, %.1f link stats, %.1f bottleneck checks; kcycles per update: "
            "update %.2f (fill %.2f, check %.2f, set %.2f), the rest of the loop %.2f\n",
            (long long)s.rate_updates, prof.fills / u, prof.first_u / u, prof.later_u / u,
            prof.touched / u, prof.pushes / u, prof.pops / u, prof.held_scans / u,
            prof.check_scans / u, prof.stats / u, prof.checks / u, prof.t_update / u / 1e3,
            prof.t_fill / u / 1e3, prof.t_check / u / 1e3, prof.t_set / u / 1e3,
            (double)(prof.t_total - prof.t_update) / u / 1e3);
    fprintf(stderr, "flowsim profile: fill's kcycles per update: marks %.2f, held %.2f, "
            "bounds %.2f, heap %.2f, freezing %.2f\n", prof.t_f[0] / u / 1e3,
            prof.t_f[1] / u / 1e3, prof.t_f[2] / u / 1e3, prof.t_f[3] / u / 1e3,
            prof.t_f[4] / u / 1e3);
    fprintf(stderr, "flowsim profile: per update: %.2f U flows without a bottleneck, %.2f held "
            "flows joined for them, %.3f fallbacks; %.2f held flows without a bottleneck\n",
            prof.nobn / u, prof.join_a / u, prof.join_fb / u, prof.join_b / u);
#endif
    if (rc == -1) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == OVERFLOW) {
        PyErr_SetString(PyExc_OverflowError, "more than 2**31 max-min fillings in one run");
        goto done;
    }
    if (rc == -2) goto done;
    result = Py_BuildValue("dLLdLd", s.finished, (long long)s.steps_done,
                           (long long)s.rate_updates, s.width, (long long)s.refilled, s.drift);
done:
    release(&s, nranks);
    for (int i = 0; i < NBUF; ++i) if (b[i].obj) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Run the flow model over a program's arrays (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.sim._flowsim",
    "The flow model's event loop and local max-min repair (compiled).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__flowsim(void) { return PyModule_Create(&module); }
