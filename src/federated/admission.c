/* Joins per address and the slot eligibility (admission.h). */
#include "federated/admission.h"

#include <stdio.h>
#include <string.h>

double dz_fed_admit_join(dz_fed_admission *a, const char *addr, double now, int max_joins) {
    dz_fed_join_window *mine = NULL, *free_entry = NULL;
    double soonest = DZ_FED_JOIN_WINDOW_S;
    for (int i = 0; i < DZ_FED_JOIN_WINDOWS; i++) {
        dz_fed_join_window *w = &a->w[i];
        if (w->start > 0 && now - w->start >= DZ_FED_JOIN_WINDOW_S) w->start = 0; /* its minute is over */
        if (w->start > 0 && !strcmp(w->addr, addr)) mine = w;
        else if (w->start <= 0 && !free_entry) free_entry = w;
        else if (w->start > 0 && w->start + DZ_FED_JOIN_WINDOW_S - now < soonest)
            soonest = w->start + DZ_FED_JOIN_WINDOW_S - now;
    }
    if (mine) {
        if (mine->joins >= max_joins) return mine->start + DZ_FED_JOIN_WINDOW_S - now;
        mine->joins++;
        return 0;
    }
    if (!free_entry) return soonest > 0 ? soonest : 1;
    snprintf(free_entry->addr, sizeof free_entry->addr, "%s", addr);
    free_entry->start = now, free_entry->joins = 1;
    return 0;
}

void dz_fed_eligible(const dz_fed_candidate *m, int n, int max_new, int *eligible) {
    for (int i = 0; i < n; i++) {
        if (m[i].proven) {
            eligible[i] = 1;
            continue;
        }
        int earlier = 0; /* new workers of the same address given slots before this one */
        for (int k = 0; k < i; k++) earlier += !m[k].proven && m[k].caught_up && !strcmp(m[k].addr, m[i].addr);
        eligible[i] = m[i].caught_up && earlier < max_new;
    }
}
