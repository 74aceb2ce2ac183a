/*
 * The team desk's delivery protocol: two desks on one store, two people, one agent whose
 * forwarder fails over from one desk to the other (docs/team.md, "Invariants").
 *
 * N requests, asked before the run (asking is keyed by call key: tests/test_team_properties).
 * Each step is one transaction of the store or one message; the store survives everything.
 *   - a person on a live desk claims a free form (no claim, or its lease ran out);
 *   - a lease runs out (its desk died, or missed its heartbeat);
 *   - a person submits: only a pending form, only with its live claim or when no live claim
 *     exists; the outcome is written in the same step (first submission wins);
 *   - the agent's forwarder sends wait_for_answers with call key `call` to its desk; the desk
 *     takes (marks delivered with `call`) every undelivered outcome, plus those already marked
 *     with `call`, and sends the result back; the forwarder hands it to the agent, and the next
 *     call has a new key;
 *   - a desk dies (at most MAXCRASH): its replies in flight are lost; the forwarder sends the
 *     same call, with the same key, to the other desk.
 *
 * Properties (checked one by one by `just model`):
 *   team_one_outcome            no request gets two outcomes;
 *   team_exactly_once           no answer reaches the agent twice;
 *   team_recorded_before_delivered  the agent holds an answer only once its outcome and its
 *                                delivery mark are in the store;
 *   team_all_delivered          once the run settles, every outcome is with the agent once.
 *
 * Compile with -DMUTANT_... to see a property fail (the test suite does each).
 */

#define N 2
#define MAXCRASH 1
#define MAXCALLS 4
#define MAXSTEPS 8

/* the store */
bit pending[N];
byte claim[N];         /* 0: none, else the desk (1, 2) */
bit lease_ok[N];
byte outcomes[N];      /* outcomes written for the request (the property: at most 1) */
byte marked[N];        /* 0: undelivered, else the call key that carried it */
/* the desks */
bit alive[3];
byte crashes;
byte steps;
/* the agent and its forwarder */
byte at = 1;           /* the desk the forwarder talks to */
byte call = 1;         /* the current call's key */
bit sent;              /* the call is at the desk, not answered yet */
bit reply;             /* the desk's reply is on its way back */
bit carried[N];        /* what the reply carries */
byte ctx[N];           /* answers the agent got */
bit done;
byte i;
byte d;

inline take(desk) {
    /* one transaction: mark the undelivered with this call, return those and the replays */
    i = 0;
    do
    :: i < N ->
#ifdef MUTANT_MARK_AGAIN
        if :: outcomes[i] > 0 -> marked[i] = call :: else fi;
#else
        if :: outcomes[i] > 0 && marked[i] == 0 -> marked[i] = call :: else fi;
#endif
        carried[i] = (marked[i] == call && outcomes[i] > 0);
        i++
    :: else -> break
    od
}

#define can_claim(desk, n) (steps < MAXSTEPS && alive[desk] && pending[n] && \
                            (claim[n] == 0 || !lease_ok[n]))
#define take_claim(desk, n) steps++; claim[n] = desk; lease_ok[n] = 1
#ifdef MUTANT_SUBMIT_ANY
#define allowed(desk, n) (outcomes[n] < 2 && (claim[n] == 0 || !lease_ok[n] || claim[n] == desk))
#else
#define allowed(desk, n) (pending[n] && (claim[n] == 0 || !lease_ok[n] || claim[n] == desk))
#endif
#define can_submit(desk, n) (steps < MAXSTEPS && alive[desk] && allowed(desk, n))

inline submit(desk, n) {
    if :: allowed(desk, n) -> pending[n] = 0; claim[n] = 0; lease_ok[n] = 0; outcomes[n]++
    :: else
    fi
}

active proctype team() {
    i = 0;
    do :: i < N -> pending[i] = 1; i++ :: else -> break od;
    alive[1] = 1; alive[2] = 1;
    do
    /* -- people (every step bounded by MAXSTEPS, so the run settles) ---------------------- */
    :: atomic { can_claim(1, 0) -> take_claim(1, 0) }
    :: atomic { can_claim(1, 1) -> take_claim(1, 1) }
    :: atomic { can_claim(2, 0) -> take_claim(2, 0) }
    :: atomic { can_claim(2, 1) -> take_claim(2, 1) }
    :: atomic { can_submit(1, 0) -> steps++; submit(1, 0) }
    :: atomic { can_submit(1, 1) -> steps++; submit(1, 1) }
    :: atomic { can_submit(2, 0) -> steps++; submit(2, 0) }
    :: atomic { can_submit(2, 1) -> steps++; submit(2, 1) }
    :: atomic { steps < MAXSTEPS && claim[0] != 0 && lease_ok[0] -> steps++; lease_ok[0] = 0 }
    :: atomic { steps < MAXSTEPS && claim[1] != 0 && lease_ok[1] -> steps++; lease_ok[1] = 0 }

    /* -- the agent's calls ------------------------------------------------------------------ */
    :: atomic { !sent && !reply && call <= MAXCALLS && alive[at] -> sent = 1 }
    :: atomic { sent && alive[at] -> take(at); sent = 0; reply = 1 }
    :: atomic { reply ->
        i = 0;
        do :: i < N -> if :: carried[i] -> ctx[i]++ :: else fi; carried[i] = 0; i++
           :: else -> break od;
        reply = 0; call++ }

    /* -- a desk dies: what it had in flight is lost; the forwarder goes on with the same key -- */
    :: atomic { crashes < MAXCRASH && alive[at] && (sent || reply) -> crashes++;
        alive[at] = 0; reply = 0;
        i = 0; do :: i < N -> carried[i] = 0; i++ :: else -> break od;
#ifdef MUTANT_NEW_KEY_ON_RETRY
        call++;
#endif
        at = 3 - at; sent = 1 }
    :: atomic { crashes < MAXCRASH && !sent && !reply -> crashes++;
        d = 1; do :: d < 2 -> d++ :: break od; alive[d] = 0;
        if :: at == d -> at = 3 - at :: else fi }

    :: timeout -> break
    od;
    /* Settle: leases run out, the live desk's person answers what is left, and the agent's
     * last call takes it (the call in flight, if any, is sent again with its key). */
    atomic {
        d = 1; if :: !alive[1] -> d = 2 :: else fi;
        i = 0;
        do :: i < N -> lease_ok[i] = 0; submit(d, i); i++ :: else -> break od;
        at = d;
        if :: reply ->
            i = 0;
            do :: i < N -> if :: carried[i] -> ctx[i]++ :: else fi; carried[i] = 0; i++
               :: else -> break od;
            reply = 0; call++
        :: else fi;
        take(at);
        i = 0;
        do :: i < N -> if :: carried[i] -> ctx[i]++ :: else fi; i++ :: else -> break od;
        done = 1
    }
}

ltl team_one_outcome { [] (outcomes[0] <= 1 && outcomes[1] <= 1) }
ltl team_exactly_once { [] (ctx[0] <= 1 && ctx[1] <= 1) }
ltl team_recorded_before_delivered {
    [] ((ctx[0] > 0 -> (outcomes[0] > 0 && marked[0] > 0)) &&
        (ctx[1] > 0 -> (outcomes[1] > 0 && marked[1] > 0)))
}
ltl team_all_delivered { [] (done -> (ctx[0] == outcomes[0] && ctx[1] == outcomes[1])) }
