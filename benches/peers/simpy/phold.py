"""PHOLD on SimPy, the same model as crates/sim/benches/phold.rs.

N logical processes (LPs), one initial event each at Exp(1.0) + 0.1 (time unit
= 1 us, so mean 1 us and lookahead 0.1 us, as in wbsim's 1000 ns + 100 ns); an
event at an LP schedules one new event on a uniformly random LP at
now + Exp(1.0) + 0.1. The run stops after a fixed number of fired events; the wall time counts
the run only (not building the N LPs and their first events), as in the
Rust versions.

Two SimPy formulations (run.sh reports the faster as "simpy"):
  callback  each PHOLD event is one `env.timeout(delay)` whose callback fires
            the LP's handler (SimPy's raw event API: the fastest honest form).
  process   each PHOLD event is one short process `yield env.timeout(delay)`
            followed by the handler (the textbook SimPy style).

One random.Random stream for the whole run (a Mersenne Twister per LP would
take 2.5 KB each: 250 MB at N = 100000); SimPy is sequential, so the draw order
is deterministic either way.

Usage: python3 phold.py N EVENTS [--process] [--seed S]; prints one JSON line.
"""

import argparse
import json
import random
import time

import simpy

MEAN = 1.0  # us, mean of the exponential part of a delay
LOOKAHEAD = 0.1  # us


def run_callback(n, events, seed):
    env = simpy.Environment()
    rng = random.Random(seed)
    expo = rng.expovariate
    randrange = rng.randrange
    timeout = env.timeout
    done = env.event()
    state = {"fired": 0}
    rate = 1.0 / MEAN

    def make_handler(lp):
        def fire(_event):
            state["fired"] += 1
            if state["fired"] >= events:
                if not done.triggered:
                    done.succeed()
                return
            dst = randrange(n)
            timeout(expo(rate) + LOOKAHEAD).callbacks.append(handlers[dst])

        return fire

    handlers = [make_handler(lp) for lp in range(n)]
    for lp in range(n):
        timeout(expo(rate) + LOOKAHEAD).callbacks.append(handlers[lp])
    start = time.perf_counter()
    env.run(until=done)
    secs = time.perf_counter() - start
    return state["fired"], secs, env.now


def run_process(n, events, seed):
    env = simpy.Environment()
    rng = random.Random(seed)
    expo = rng.expovariate
    randrange = rng.randrange
    timeout = env.timeout
    process = env.process
    done = env.event()
    state = {"fired": 0}
    rate = 1.0 / MEAN

    def event(lp, delay):
        yield timeout(delay)
        state["fired"] += 1
        if state["fired"] >= events:
            if not done.triggered:
                done.succeed()
            return
        process(event(randrange(n), expo(rate) + LOOKAHEAD))

    for lp in range(n):
        process(event(lp, expo(rate) + LOOKAHEAD))
    start = time.perf_counter()
    env.run(until=done)
    secs = time.perf_counter() - start
    return state["fired"], secs, env.now


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("events", type=int)
    ap.add_argument("--process", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.n <= 0 or a.events <= 0:
        ap.error("N and EVENTS must be positive")
    f = run_process if a.process else run_callback
    fired, secs, now = f(a.n, a.events, a.seed)
    print(
        json.dumps(
            {
                "engine": "simpy",
                "variant": "process" if a.process else "callback",
                "simpy": simpy.__version__,
                "N": a.n,
                "events": fired,
                "secs": round(secs, 6),
                "events_per_s": round(fired / secs, 1),
                "sim_us": round(now, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
