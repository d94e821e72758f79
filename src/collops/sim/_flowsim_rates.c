/* The flow model's compiled run: the max-min rates of the flows in the network, repaired
 * locally (the essay is at the top of _flowsim.c). */
#include "_flowsim.h"

/* ---- max-min rates, repaired locally ----------------------------------------------------- */
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

FLOWSIM_INTERNAL int update_rates(Sim *s) {
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
