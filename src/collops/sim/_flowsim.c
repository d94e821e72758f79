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
#include "_flowsim.h"

#ifdef FLOWSIM_PROFILE
struct FlowsimProfile prof;
#endif

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
