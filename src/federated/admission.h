/* Who may join a federated run, and which workers get slots (docs/FEDERATED.md, "A token
 * holder's joins"): joins are counted per client address in windows of a minute, and a
 * round's slots go to workers that have delivered before, or to new ones within the cap
 * per address. A new worker that lets a round run to its deadline without delivering is
 * forgotten: it joins again, which its address's joins pay for. */
#ifndef DZ_FEDERATED_ADMISSION_H
#define DZ_FEDERATED_ADMISSION_H

enum {
    DZ_FED_ADDRESS_CHARS = 46,           /* an IPv6 address as text, with its NUL */
    DZ_FED_JOIN_WINDOWS = 512,           /* client addresses counted at once */
    DZ_FED_JOIN_WINDOW_S = 60,           /* the window joins are counted in */
    DZ_FED_MAX_JOINS_DEFAULT = 8,        /* --max-joins-per-client */
};

typedef struct dz_fed_join_window {
    char addr[DZ_FED_ADDRESS_CHARS];
    double start;                        /* the window's first join; 0: a free entry */
    int joins;
} dz_fed_join_window;

typedef struct dz_fed_admission {
    dz_fed_join_window w[DZ_FED_JOIN_WINDOWS];
} dz_fed_admission;

/* A join from addr at time now (seconds), at most max_joins per address and window: 0
 * admitted (and counted); else the seconds until the address's window ends (over the cap)
 * or until an entry frees (every one in use). */
double dz_fed_admit_join(dz_fed_admission *a, const char *addr, double now, int max_joins);

/* One connected worker, as the slot assignment sees it. */
typedef struct dz_fed_candidate {
    const char *addr;
    int proven;                          /* it has submitted in this session */
    int caught_up;                       /* it said it applied every published record (but the newest) */
} dz_fed_candidate;

/* eligible[i] for the n workers in machine-id order: proven ones; new ones that are caught
 * up and among the first max_new such (new, caught up) workers of their address. */
void dz_fed_eligible(const dz_fed_candidate *m, int n, int max_new, int *eligible);

#endif
