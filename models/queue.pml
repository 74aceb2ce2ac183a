/*
 * The queue's delivery protocol with crash and restart (docs/architecture.md, "Model check").
 *
 * N background requests. Each step below is one atomic action of one actor: a form journals
 * its outcome, then tells the queue; the queue routes outcomes to the active wait, answers
 * turn boundaries and wakes the idle agent, writing the delivery marks first; the waiter
 * journals its tool result (the delivery mark of the results it returns), returns it to the
 * agent, then tells the queue. A crash (at most MAXCRASH) loses every message in flight and
 * the queue's memory; the restart rebuilds the queue from the journal, and the agent's
 * context is what the journal holds (a mark is the message on the branch).
 *
 * Properties (LTL, checked one by one by `just model`):
 *   exactly_once               no message reaches the agent twice, no mark is written twice;
 *   recorded_before_delivered  the agent holds a message only once its outcome and its
 *                              delivery mark are journaled;
 *   all_delivered              once the run settles, every journaled outcome is in the
 *                              agent's context exactly once.
 *
 * Compile with -DMUTANT_... to see a property fail (the test suite does one of them).
 */

#define N 2
#define MAXCRASH 1
#define MAXSTEPS 6

/* the journal: survives a crash */
bit j_out[N];          /* the outcome is recorded */
byte marks[N];         /* delivery marks recorded: a wake's or boundary's entry, a wait's result */
/* the agent's context: rebuilt from the journal after a crash */
byte ctx[N];
/* the queue's memory */
bit q_out[N];
bit q_del[N];
bit member[N];
bit routed[N];
bit idle = 1;
bit woken;
bit waiting;           /* a wait is active in the queue */
bit answered;          /* ... and has replied */
/* messages in flight (lost in a crash) */
bit stopped[N];        /* FormStopped */
bit b_pending;         /* a turn boundary's reply */
bit b_msg[N];
bit wake[N];           /* a wake, on its way to the agent */
bit w_end;             /* the wait's reply, on its way to the waiter */
bit w_res[N];
bit w_written;         /* the waiter journaled its result, has not returned it yet */
bit in_call;           /* a wait_for_answers call is running */
bit endwait;           /* EndWait */
bit endack;
/* bookkeeping */
byte crashes;
byte steps;
bit done;
byte i;

/* The wait replies; a call that already ended has closed its reply channel: the reply is lost
 * (its EndWait gives the routed outcomes back). */
inline finish_wait() {
    answered = 1;
    if
    :: in_call ->
        w_end = 1;
        i = 0;
        do
        :: i < N -> w_res[i] = routed[i]; i++
        :: else -> break
        od
    :: else
    fi
}

inline all_members_out(result) {
    result = 1;
    i = 0;
    do
    :: i < N -> if :: member[i] && !q_out[i] -> result = 0 :: else fi; i++
    :: else -> break
    od
}

/* Wake an idle agent with the first ready outcome: the mark first, then the message. */
inline try_wake() {
    if
    :: idle && !woken ->
        i = 0;
        do
        :: i < N && q_out[i] && !q_del[i] && !routed[i] ->
#ifdef MUTANT_WAKE_BEFORE_MARK
            wake[i] = 1; q_del[i] = 1; woken = 1; pending_mark = i + 1;
#else
            marks[i]++; wake[i] = 1; q_del[i] = 1; woken = 1;
#endif
            break
        :: i < N && !(q_out[i] && !q_del[i] && !routed[i]) -> i++
        :: i >= N -> break
        od
    :: else
    fi
}

#ifdef MUTANT_WAKE_BEFORE_MARK
byte pending_mark;
#endif

bit all_out;
byte r;

active proctype system() {
    do
    /* -- forms: journal the outcome, then tell the queue -------------------------------- */
    :: atomic { !j_out[0] -> j_out[0] = 1; stopped[0] = 1 }
    :: atomic { !j_out[1] -> j_out[1] = 1; stopped[1] = 1 }

    /* -- the queue receives FormStopped ------------------------------------------------- */
    :: atomic { stopped[0] || stopped[1] ->

        if :: stopped[0] -> r = 0 :: else -> r = 1 fi;
        stopped[r] = 0;
        q_out[r] = 1;
#ifdef MUTANT_ROUTE_TO_ANSWERED
        if :: waiting && member[r] -> routed[r] = 1 :: else fi;
        all_members_out(all_out);
        if :: waiting && !answered && all_out -> finish_wait() :: else fi;
#else
        if
        :: waiting && !answered && member[r] ->
            routed[r] = 1;
            all_members_out(all_out);
            if :: all_out -> finish_wait() :: else fi
        :: else
        fi;
#endif
        try_wake()
    }

    /* -- the agent: busy / idle, a turn boundary, a wait ----------------------------------- */
    :: atomic { steps < MAXSTEPS && idle -> steps++; idle = 0 }
    :: atomic { steps < MAXSTEPS && !idle -> steps++; idle = 1; woken = 0; try_wake() }
    :: atomic { steps < MAXSTEPS && !b_pending -> steps++;
        /* the queue answers the boundary: every ready outcome, marked in one write */
        i = 0;
        do
        :: i < N ->
            if
            :: q_out[i] && !q_del[i] && !routed[i] -> marks[i]++; q_del[i] = 1; b_msg[i] = 1
            :: else
            fi;
            i++
        :: else -> break
        od;
        b_pending = 1
    }
    :: atomic { b_pending ->
        i = 0;
        do
        :: i < N -> ctx[i] = ctx[i] + b_msg[i]; b_msg[i] = 0; i++
        :: else -> break
        od;
        b_pending = 0
    }
    :: atomic { wake[0] -> ctx[0]++; wake[0] = 0 }
    :: atomic { wake[1] -> ctx[1]++; wake[1] = 0 }
    :: atomic { steps < MAXSTEPS && !in_call && !waiting && !endwait -> steps++;
        /* StartWait: every request without an outcome, and every undelivered outcome */
        in_call = 1;
        waiting = 1;
        i = 0;
        do
        :: i < N ->
            member[i] = !q_out[i] || (!q_del[i] && !routed[i]);
            routed[i] = member[i] && q_out[i];
            i++
        :: else -> break
        od;
        all_members_out(all_out);
        if :: all_out -> finish_wait() :: else fi
    }
    /* the person sends a message: the wait is answered as deferred */
    :: atomic { steps < MAXSTEPS && waiting && !answered -> steps++; finish_wait() }
    /* the waiter journals its result (the mark of what it returns), returns it, acknowledges */
#ifdef MUTANT_RETURN_BEFORE_WRITE
    :: atomic { in_call && w_end && !w_written ->
        i = 0;
        do :: i < N -> ctx[i] = ctx[i] + w_res[i]; i++ :: else -> break od;
        w_written = 1
    }
    :: atomic { in_call && w_written ->
        i = 0;
        do :: i < N -> marks[i] = marks[i] + w_res[i]; w_res[i] = 0; i++ :: else -> break od;
        w_written = 0; w_end = 0; in_call = 0; endwait = 1; endack = 1
    }
#else
    :: atomic { in_call && w_end && !w_written ->
        i = 0;
        do :: i < N -> marks[i] = marks[i] + w_res[i]; i++ :: else -> break od;
        w_written = 1
    }
    :: atomic { in_call && w_written ->
        i = 0;
        do :: i < N -> ctx[i] = ctx[i] + w_res[i]; w_res[i] = 0; i++ :: else -> break od;
        w_written = 0; w_end = 0; in_call = 0; endwait = 1; endack = 1
    }
#endif
    /* the call is cancelled before it wrote its result: unacknowledged */
    :: atomic { steps < MAXSTEPS && in_call && !w_written -> steps++;
        i = 0;
        do :: i < N -> w_res[i] = 0; i++ :: else -> break od;
        w_end = 0; in_call = 0; endwait = 1; endack = 0
    }
    /* the queue receives EndWait: acknowledged results are delivered, others given back */
    :: atomic { endwait ->
        i = 0;
        do
        :: i < N ->
#ifdef MUTANT_NO_GIVE_BACK
            if :: routed[i] -> q_del[i] = 1 :: else fi;
#else
            if :: routed[i] && endack && answered -> q_del[i] = 1 :: else fi;
#endif
            routed[i] = 0; member[i] = 0; i++
        :: else -> break
        od;
        waiting = 0; answered = 0; endwait = 0;
        try_wake()
    }

    /* -- a crash: the journal stays, everything else is rebuilt from it -------------------- */
    :: atomic { crashes < MAXCRASH -> crashes++;
        i = 0;
        do
        :: i < N ->
            stopped[i] = 0; b_msg[i] = 0; wake[i] = 0; w_res[i] = 0;
            member[i] = 0; routed[i] = 0;
            q_out[i] = j_out[i];
            q_del[i] = marks[i] > 0;
            ctx[i] = marks[i];
            i++
        :: else -> break
        od;
        b_pending = 0; w_end = 0; w_written = 0; in_call = 0; endwait = 0; endack = 0;
        waiting = 0; answered = 0; idle = 1; woken = 0;
        try_wake()
    }
#ifdef MUTANT_WAKE_BEFORE_MARK
    :: atomic { pending_mark > 0 -> marks[pending_mark - 1]++; pending_mark = 0 }
#endif

    /* -- nothing else can happen: settle ------------------------------------------------- */
    :: timeout -> break
    od;
    /* The run settles: a running wait is cancelled, the agent takes a last boundary. */
    atomic {
        if
        :: in_call ->
            i = 0;
            do :: i < N -> w_res[i] = 0; i++ :: else -> break od;
            w_end = 0; in_call = 0; endwait = 1; endack = 0
        :: else
        fi;
        if
        :: endwait ->
            i = 0;
            do :: i < N -> routed[i] = 0; member[i] = 0; i++ :: else -> break od;
            waiting = 0; answered = 0; endwait = 0
        :: else
        fi;
        i = 0;
        do
        :: i < N ->
            if :: q_out[i] && !q_del[i] -> marks[i]++; q_del[i] = 1; ctx[i]++ :: else fi;
            i++
        :: else -> break
        od;
        done = 1
    }
}

ltl exactly_once { [] (ctx[0] <= 1 && ctx[1] <= 1 && marks[0] <= 1 && marks[1] <= 1) }
ltl recorded_before_delivered {
    [] ((ctx[0] > 0 -> (j_out[0] && marks[0] > 0)) && (ctx[1] > 0 -> (j_out[1] && marks[1] > 0)))
}
ltl all_delivered { [] (done -> (ctx[0] == j_out[0] && ctx[1] == j_out[1])) }
