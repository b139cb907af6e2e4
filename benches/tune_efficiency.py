"""How good and how cheap ``arena tune``'s search is, beside the full grid it replaces.

Each synthetic app (CPU and I/O per request, their variability, 1 or 2 cores, a p99 target) is
served by the simulator (the truth: model/sim.py, seeded, with run-to-run noise on every p99) under
Puma and gunicorn-gthread at every processes x threads of a grid. The **full grid** finds every
configuration's capacity as ``[load] find = "capacity"`` does (one closed run with every slot busy,
then the same bracketing search from a share of its throughput); **tune** ranks the grid by the simulator
from a calibration a few percent off (as a real one is; the truth's p99 is also off the simulator's
by about 10% per configuration), races the best and finds the finalists' capacity (model/search.py,
app/tune.py's race field). Printed per app and in all: the runs each took (tune's share of the
grid's; tune's with its calibration's, three runs a server), whether tune's choice is in the grid's
tied-best group, its true capacity against the best true capacity, the best true capacity among the
configurations raced ("raced": the best predicted, and those the race's runs lifted into it; below
95%, none within 5% of the best was among them), and
how far the model tune ranks with is off the true capacities from one configuration to the next
("model": past each server's median error, the sd over the tied group; tune's misses are where it is wide).

The tied-best group is what the grid cannot order: the capacities within the grid's repeatability
of its best (how far a configuration's capacity moves when the whole grid is run again with other
noise, its 90th percentile), or a bracket open at its top; the best's capacity there is the lower of
its two measurements, the highest of many near-equal capacities being the luckiest of them. The A/A
case: a third full grid's choice, judged as tune's is; tune can do no better than a grid repeated.
An app where no configuration meets the goal at any rate is left out of the sums (tune must say so),
as is one whose goal sits at the edge of every configuration's reach: the grid measured again finds
none of its capacities, or in truth none has one; there is no best to judge by.

Targets (issue: arena tune): within the tied-best group, within 5% of the best capacity, at most
25% of the grid's runs. Pure computation, no server, the apps spread over the CPUs (one each): seed 1
took 516 s here on two CPUs (684 s one app at a time).

    .venv/bin/python benches/tune_efficiency.py [--apps 12] [--noise 0.08] [--off 0.1] [--seed 1]

``--converged`` asks only whether the model's ranking holds the best, without what the truth has
and the model cannot know (a configuration's p99 off, the truth's own sample): against the simulator
converged (the true calibration, CONVERGED requests a rate, nothing off), the best true capacity among
the configurations tune races, and where the model ranks the first of the best capacity (about half
an hour one app at a time, before the apps were spread over the CPUs).

``--real`` instead tunes on this machine with real servers and judges tune's choice by recorded full
grids (benches/data/tune-grid-SERVER-1cpu.db.gz, for gunicorn-gthread and Puma: processes 1-4 x threads
1-32 on CPU 1, every configuration's capacity by ``[load] find = "capacity"``, the subject app's
default workload, p99 <= 200 ms; and each grid's best 8 measured again, the A/A case that sets the
tied group): ``arena tune`` of the same space (``--servers``, ``--processes``, ``--threads``), its runs,
time and choice beside the grids', and how far the model (tune's calibration) is off the grids'
capacities: each server's median error, and past it, how much that error differs among the configurations
the grids cannot order (about 10 minutes; the synthetic apps print the same figure against their truth).
``--record SERVER`` makes a server's recording (about 40 minutes; it resumes the one there is).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.predict import given_calibration, over_the_cpus  # noqa: E402
from arena.app.find import saturation_start  # noqa: E402
from arena.app.tune import FINAL_WITHIN, Request, _calibration_points  # noqa: E402
from arena.model.contenders import RACE, learner, race_field, ranked, with_reach  # noqa: E402
from arena.model import simulated  # noqa: E402
from arena.model.recommend import slo_capacity  # noqa: E402
from arena.model.capacity import highest_rate  # noqa: E402
from arena.model.search import Contender, search  # noqa: E402
from arena.plan.experiment import Level  # noqa: E402
from arena.results.answer import Goal  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.doubles import Modelled  # noqa: E402

SERVERS = ("puma", "gunicorn-gthread")
THREADS = (1, 2, 4, 8, 16)
RUN_S = 8.0  # a run as tune counts it: start, warm-up, 3 s measured
# PSS (MiB): base, per process, per thread (Calibration.memory_mib): tune's calibrations of the subject app here
MEMORY = {"puma": (9.0, 12.6, 0.03), "gunicorn-gthread": (18.0, 9.3, 0.0)}


@functools.cache
def memory_calibration(server: str):
    """A calibration with ``server``'s MEMORY figures, built once (its memory_mib is the formula)."""
    base, per_process, per_thread = MEMORY[server]
    return dataclasses.replace(given_calibration(server, 1, 1.0, 0.0), memory_base_mib=base,
                               memory_per_process_mib=per_process, memory_per_thread_mib=per_thread)


def memory_mib(key: tuple[str, int, int]) -> float:
    """A configuration's memory, which breaks ties between capacities found as high (as in a real tune)."""
    return memory_calibration(key[0]).memory_mib(key[1], key[2])


def app(rng: random.Random) -> dict:
    cpu = math.exp(rng.uniform(math.log(1.0), math.log(20.0)))
    io = rng.choice((0.0, 0.5, 1.0, 3.0)) * cpu
    return {"cpu_ms": round(cpu, 2), "io_ms": round(io, 2), "cv2": rng.choice((0.3, 1.0, 2.0)),
            "cores": rng.choice((1, 2)), "target_x": rng.uniform(3.0, 10.0)}


def grid(cores: int) -> list[tuple[str, int, int]]:
    """Processes 1 to 4 (the process counts the real grids are recorded with on one CPU; 2 x cores
    where that is more) x THREADS, for each server."""
    return [(s, p, t) for s in SERVERS for p in range(1, max(max(PROCESSES), 2 * cores) + 1) for t in THREADS]


def truth_of(a: dict, seed: int, off: float, requests: int = 8000):
    """The simulator with more requests and its own seed, each configuration's p99 off by a fixed
    log-normal factor of spread ``off`` (0.1: the simulator's p99 error on held-out sweeps is about 11%)."""
    cals = {s: given_calibration(s, a["cores"], a["cpu_ms"], a["io_ms"], cpu_cv2=a["cv2"]) for s in SERVERS}
    rng = random.Random(seed)
    bias = {k: rng.lognormvariate(0, off) if off else 1.0 for k in grid(a["cores"])}

    @functools.lru_cache(maxsize=None)
    def truth(key, level):
        s, p, t = key
        sim = simulated.predict(cals[s], p, t, level.model, level.value, requests=requests, replications=1, seed=11)
        return sim.prediction.p99_ms * bias[key], sim.prediction.throughput

    return truth


def model_off(predicted: dict, capacity: dict, server_of: Callable, among) -> tuple[dict[str, float], float]:
    """How far the model's capacities (``predicted``) are off the measured or true ones (``capacity``):
    each server's median error (a share: -0.05 is 5% low), one factor the race and the capacity search
    measure past, and the spread (sd of the log) of what is left over the configurations ``among``,
    which differs from one configuration to the next: where it is wider than the race can cover, the
    best is not always raced."""
    err = {k: math.log(predicted[k] / capacity[k]) for k in capacity if predicted.get(k) and capacity[k]}
    common = {s: statistics.median(e for k, e in err.items() if server_of(k) == s) for s in dict.fromkeys(map(server_of, err))}
    rest = [err[k] - common[server_of(k)] for k in among if k in err]
    return {s: math.exp(v) - 1 for s, v in common.items()}, statistics.pstdev(rest) if len(rest) > 1 else 0.0


def tied_with_best(capacities: dict, repeat: float, again: dict) -> set:
    """The grid's tied-best group, of ``capacities`` (key: (lower end, upper end)): those a grid
    measured again could put first, their lower end within ``repeat`` (how far a capacity moves when
    measured again) of the best's, or their bracket open at the top. The best's is the lower of its
    two measurements (``again``: key -> lower end measured again): the highest of many near-equal
    capacities is the luckiest of them, a bar no other configuration's one measurement is held to."""
    best = max(capacities, key=lambda k: capacities[k][0])
    bar = min(capacities[best][0], again.get(best) or math.inf)
    return {k for k, (lo, hi) in capacities.items() if lo * (1 + repeat) >= bar or hi is None}


def goal_of(a: dict) -> Goal:
    return Goal(p99_ms=a["target_x"] * (a["cpu_ms"] + a["io_ms"]), error_pct=1.0)


def describe(a: dict) -> str:
    return f"cpu {a['cpu_ms']:g} io {a['io_ms']:g} cv2 {a['cv2']:g} cores {a['cores']} p99<{a['target_x']:.1f}x"


def true_capacities(a: dict, truth, goal: Goal) -> dict:
    """Each configuration's capacity in ``truth``: the highest open rate whose p99 keeps within the goal."""
    top = 1000.0 * a["cores"] / a["cpu_ms"]  # the cores' CPU bound: no capacity is above it
    return {k: highest_rate(lambda r, k=k: truth(k, Level("open", r))[0], goal.p99_within, top, steps=16)
            for k in grid(a["cores"])}


def model_calibrations(a: dict, seed: int) -> dict:
    """What tune's model knows of each server: a calibration a few percent off, as measured figures are."""
    rng = random.Random(seed)
    return {s: given_calibration(s, a["cores"], a["cpu_ms"] * rng.uniform(0.95, 1.05),
                                 a["io_ms"] * rng.uniform(0.9, 1.1), cpu_cv2=a["cv2"]) for s in SERVERS}


def model_ranking(a: dict, seed: int, goal: Goal) -> list[Contender]:
    """The grid as tune ranks it: by the model's capacity, from its calibrations."""
    off = model_calibrations(a, seed)
    return ranked([Contender(k, f"{k[0]} p={k[1]} t={k[2]}", slo_capacity(off[k[0]], k[1], k[2], goal, sim=True))
                   for k in grid(a["cores"])])


def best_raced(true_cap: dict, field: list[Contender]) -> float:
    """The best true capacity among the configurations raced, as a share of the best of all."""
    return max(true_cap[c.key] for c in field) / max(true_cap.values())


def one(a: dict, seed: int, noise: float, off: float) -> dict:
    truth = truth_of(a, seed, off)
    goal = goal_of(a)
    keys = grid(a["cores"])
    true_cap = true_capacities(a, truth, goal)
    best_true = max(true_cap.values())
    ranking = model_ranking(a, seed, goal)

    def full_grid(grid_seed: int) -> tuple[int, dict]:
        """Every configuration's capacity as ``[load] find = "capacity"`` finds it: one closed run with
        every slot busy, then the bracketing search from a share of its throughput."""
        full = Modelled(truth, noise=noise, seed=grid_seed, run_s=RUN_S, memory_mib=memory_mib)
        caps = {}
        for k in keys:
            _, start = saturation_start(full, k, *k, a["cores"])
            t = search([Contender(k, str(k), start)], goal, None, full, budget_s=math.inf, run_s=RUN_S, clock=full.clock)
            caps[k] = t.capacities.get(k)
        return full.made, {k: c for k, c in caps.items() if c is not None and c.lo is not None}

    tuned = Modelled(truth, noise=noise, seed=seed + 1, run_s=RUN_S, memory_mib=memory_mib)
    field = race_field(ranking)
    cals = model_calibrations(a, seed)
    others = with_reach([c for c in ranking if c not in field], field, cals, goal)
    t = search(field, goal, None, tuned, budget_s=math.inf, run_s=RUN_S, clock=tuned.clock,
               others=others, learn=learner(cals, ranking), within=FINAL_WITHIN)
    choice = t.choice
    tune_runs = tuned.made + sum(len(_calibration_points(Request((), (), 0.0), s, a["cores"])) for s in SERVERS)  # its calibration's too
    grid_runs, found = full_grid(seed)
    if not found:  # nothing meets the goal at any rate: the right answer is to say so
        return {"grid_runs": grid_runs, "tune_runs": tune_runs, "none": True,
                "tune_none": choice is None and t.none_meets}
    # the grid's repeatability: how far a configuration's capacity moves when the grid is run again
    # (90th percentile over the configurations); the tied-best group: the capacities within it of the
    # best (the lower of its two measurements), or a bracket open at its top: what a repeated grid
    # could order either way
    _, again = full_grid(seed + 1000)
    moved = sorted(abs(math.log(found[k].lo / again[k].lo)) for k in found if k in again)
    edge = ([] if moved else ["measured again, the grid finds nothing within the goal"]) + (
        [] if best_true else ["in truth nothing meets it at any rate"])
    if edge:  # the goal at the edge of every configuration's reach: no repeatable capacity, no best to judge by
        return {"grid_runs": grid_runs, "tune_runs": tune_runs, "edge": "; ".join(edge), "choice": choice,
                "share": true_cap[choice] / best_true if choice and best_true else None}
    tol = math.exp(moved[int(0.9 * (len(moved) - 1))]) - 1
    tied_group = tied_with_best({k: (c.lo, c.hi) for k, c in found.items()}, tol, {k: c.lo for k, c in again.items()})
    # the A/A case: a third full grid, its choice judged as tune's is
    _, third = full_grid(seed + 2000)
    again_best = max(third.values(), key=lambda c: c.lo).key if third else None  # None: it found none
    spread = model_off({c.key: c.predicted for c in ranking}, true_cap, lambda k: k[0], tied_group)[1]
    return {"grid_runs": grid_runs, "tune_runs": tune_runs, "in_group": choice in tied_group, "group": len(tied_group),
            "model_spread": spread, "raced": best_raced(true_cap, t.raced), "lifted": len(t.lifted),
            "share": true_cap[choice] / best_true if choice else 0.0, "choice": choice,
            "aa_in_group": again_best in tied_group, "tol": tol,
            "aa_share": true_cap[again_best] / best_true if again_best else 0.0,
            "best": max(true_cap, key=true_cap.get), "best_true": best_true}


def _simulated_row(a: dict, r: dict, rows: list[dict]) -> None:
    rows.append(r)
    head = f"{describe(a):<44} {r['grid_runs']:>9} {r['tune_runs']:>9} {r['tune_runs'] / r['grid_runs']:>6.0%} "
    if r.get("none"):
        print(head + f"nothing meets the goal at any rate; tune said so: {'yes' if r['tune_none'] else 'NO'}", flush=True)
        return
    if r.get("edge"):
        chose = f"tune chose {r['choice']}" if r["choice"] else "tune found none"
        share = "" if r["share"] is None else f", {r['share']:.1%} of the best true capacity"
        print(head + f"{r['edge']}; {chose}{share}", flush=True)
        return
    print(head + f"{('yes' if r['in_group'] else 'NO') + ' of ' + str(r['group']):>9} {r['share']:>7.1%} "
          f"{r['raced']:>6.1%} {r['tol']:>6.1%} {r['model_spread']:>6.1%} {'yes' if r['aa_in_group'] else 'NO':>8} "
          f"{r['aa_share']:>8.1%}  {r['choice']}", flush=True)


def simulated_bench(args) -> int:
    rng = random.Random(args.seed)
    rows = []
    print(f"{'app':<44} {'grid runs':>9} {'tune runs':>9} {'share':>6} {'in tied':>9} {'of best':>7} "
          f"{'raced':>6} {'repeat':>6} {'model':>6} {'A/A tied':>8} {'A/A best':>8}  tune's choice")
    apps = [app(rng) for _ in range(args.apps)]
    with over_the_cpus(chunksize=1) as spread:  # the apps at once, one a CPU; printed in their order
        results = spread(functools.partial(one, noise=args.noise, off=args.off), apps, range(args.seed, args.seed + args.apps))
        for a, r in zip(apps, results):
            _simulated_row(a, r, rows)
    none = [r for r in rows if r.get("none")]
    edge = [r for r in rows if r.get("edge")]
    rows = [r for r in rows if not r.get("none") and not r.get("edge")]
    if none:
        share = statistics.median(r["tune_runs"] / r["grid_runs"] for r in none)
        print(f"\n{len(none)} app(s) where nothing meets the goal at any rate (left out below): tune said so in "
              f"{sum(r['tune_none'] for r in none)}, with a median {share:.0%} of the grid's runs", flush=True)
    if edge:
        print(f"\n{len(edge)} app(s) whose goal is at the edge of every configuration's reach (left out below): "
              f"no capacity the grid finds again, or none in truth", flush=True)
    n = len(rows)
    share = statistics.median(r["tune_runs"] / r["grid_runs"] for r in rows)
    print(f"\nover {n} apps: tune's runs are a median {share:.0%} of the grid's (most "
          f"{max(r['tune_runs'] / r['grid_runs'] for r in rows):.0%}); its choice is in the grid's tied-best group in "
          f"{sum(r['in_group'] for r in rows)}/{n}, within 5% of the best true capacity in "
          f"{sum(r['share'] >= 0.95 for r in rows)}/{n} (worst {min(r['share'] for r in rows):.1%})")
    raced = [r for r in rows if r["raced"] >= 0.95]
    print(f"the race (the {RACE} best predicted, and {sum(r['lifted'] for r in rows)} its runs lifted into it in "
          f"{sum(r['lifted'] > 0 for r in rows)} apps) held a configuration within 5% of the best true capacity in "
          f"{len(raced)}/{n}; tune's "
          f"choice was within 5% in {sum(r['share'] >= 0.95 for r in raced)} of those, in "
          f"{sum(r['share'] >= 0.95 for r in rows if r not in raced)} of the other {n - len(raced)}")
    spreads = [r["model_spread"] for r in rows]
    print(f"the model's capacities, past each server's median error, are off the true ones by a median "
          f"{statistics.median(spreads):.1%} (sd over an app's tied group; most {max(spreads):.1%})")
    print(f"A/A: another full grid (other noise) chose within the first grid's tied-best group in "
          f"{sum(r['aa_in_group'] for r in rows)}/{n}, within 5% of the best true capacity in "
          f"{sum(r['aa_share'] >= 0.95 for r in rows)}/{n} (worst {min(r['aa_share'] for r in rows):.1%})")
    return 0


CONVERGED = 64000  # requests a rate of the converged truth: its capacities within about 3% from seed to seed


def converged_one(a: dict, seed: int) -> dict | None:
    """Against the simulator converged (the true calibration, nothing off): the best true capacity
    among the configurations tune races, as a share of the best, and where the model ranks the first
    configuration of the best capacity (None: nothing meets the goal at any rate)."""
    goal = goal_of(a)
    true_cap = true_capacities(a, truth_of(a, seed, 0.0, CONVERGED), goal)
    best = max(true_cap, key=true_cap.get)
    if not true_cap[best]:
        return None
    ranking = model_ranking(a, seed, goal)
    return {"share": best_raced(true_cap, race_field(ranking)), "best": best,
            "place": next(j for j, c in enumerate(ranking) if true_cap[c.key] == true_cap[best]) + 1}


def converged_bench(args) -> int:
    """Whether the model's ranking holds the best: against the simulator converged, the best true
    capacity among the configurations tune races."""
    rng = random.Random(args.seed)
    shares = []
    print(f"{'app':<44} {'raced':>6} {'best ranked':>11}  a configuration of the best capacity")
    apps = [app(rng) for _ in range(args.apps)]
    with over_the_cpus(chunksize=1) as spread:
        results = list(spread(converged_one, apps, range(args.seed, args.seed + args.apps)))
    for a, r in zip(apps, results):
        if r is None:
            print(f"{describe(a):<44} nothing meets the goal at any rate", flush=True)
            continue
        shares.append(r["share"])
        print(f"{describe(a):<44} {r['share']:>6.1%} {r['place']:>11}  {r['best']}", flush=True)
    firsts = sum(s == 1.0 for s in shares)
    within = sum(s >= 0.95 for s in shares)
    print(f"\nover {len(shares)} apps, against the simulator converged ({CONVERGED} requests a rate): the {RACE} "
          f"raced held a configuration of the best true capacity in {firsts}, one within 5% of it in {within} "
          f"(worst {min(shares, default=0.0):.1%})")
    return 0


PROCESSES = (1, 2, 3, 4)
REAL_THREADS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
REAL_SERVERS = ("gunicorn-gthread", "puma")  # the servers a grid is recorded for, each in its own store
GRID = "tune-bench-grid"
TUNE = "tune-bench"  # the experiment arena tune stores its runs as
AGAIN = 8  # the best configurations whose capacity the recording measures a second time (the A/A case)
REAL_P99_MS = 200  # the target the grids are recorded with and tune is given


def recorded(server: str) -> Path:
    return ROOT / "benches" / "data" / f"tune-grid-{server}-1cpu.db.gz"


def real_grid(server: str, name: str = GRID, points: list[tuple[int, int]] | None = None) -> str:
    """The full grid of ``server`` tune is compared with (its subject app, tune's default workload);
    with ``points``, only those processes x threads, one entry each (the A/A case)."""
    from arena.servers import catalog

    entry = f'[[servers]]\nserver = "{server}"\napp = "{catalog.get_server(server).apps[0]}"\n'
    servers = (entry + f"processes = {list(PROCESSES)}\nthreads = {list(REAL_THREADS)}\n" if points is None else
               "".join(entry + f"processes = {p}\nthreads = {t}\n" for p, t in points))
    return f"""name = "{name}"
description = "the full grid tune is compared with: every configuration's capacity, as tune measures it"
duration = "3s"
warmup = "1s"
repetitions = 1
seed = 1
[workload]
path = "/work?cpu_ms=5&io_ms=10"
[load]
find = "capacity"
[goal]
p99_max = "{REAL_P99_MS}ms"
error_max = "1%"
{servers}[layout]
server_cpus = "1"
load_cpus = "0"
"""


def _gunzip(src: Path, dst: Path) -> None:
    import gzip
    import shutil

    with gzip.open(src, "rb") as a, open(dst, "wb") as b:
        shutil.copyfileobj(a, b)


def _plain(label: str) -> str:
    """A configuration's label without its app: "gunicorn-gthread[wsgi] p=1 t=4" -> "gunicorn-gthread p=1 t=4"."""
    return re.sub(r"\[[^]]*\]", "", label)


def record(args) -> int:
    """Run the full grid of one server (every configuration's capacity; resuming the recorded one if
    there is one), then the capacities of its AGAIN best a second time, and keep the store, gzipped."""
    import gzip
    import shutil

    server, path = args.record, recorded(args.record)
    with tempfile.TemporaryDirectory() as tmp:
        exp, db = Path(tmp) / "grid.toml", Path(tmp) / "grid.db"
        if path.exists():
            _gunzip(path, db)
        exp.write_text(real_grid(server))
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "arena", "run", str(exp), "--store", str(db)], text=True)
        print(f"full grid: {time.monotonic() - t0:.0f} s, exit {done.returncode}")
        caps = _grid_of(str(db))[0]
        best = sorted((k for k in caps if caps[k][0] is not None), key=lambda k: -caps[k][0])[:AGAIN]
        points = [_point(k)[1:] for k in best]
        exp.write_text(real_grid(server, f"{GRID}-again", points))
        t0 = time.monotonic()
        aa = subprocess.run([sys.executable, "-m", "arena", "run", str(exp), "--store", str(db)], text=True)
        print(f"the best {AGAIN} again: {time.monotonic() - t0:.0f} s, exit {aa.returncode}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(db, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    print(f"recorded: {path}")
    return 0 if done.returncode in (0, 1) and aa.returncode in (0, 1) else 1


def _point(label: str) -> tuple[str, int, int]:
    """A plain label's server, processes and threads: "puma p=1 t=4" -> ("puma", 1, 4)."""
    server, *parts = label.split()
    p, t = (int(part.split("=")[1]) for part in parts)
    return server, p, t


def predicted_capacities(tune_db: str, labels: list[str]) -> dict[str, float]:
    """The model's capacity within the target (req/s) of each configuration of ``labels``, from the
    calibration ``arena tune`` made (its runs at one client in ``tune_db``), as tune predicts it."""
    from arena.app.tune import calibration_observations
    from arena.model.calibrate import calibrate
    from arena.plan.stored import stored_experiment
    from arena.results.store import Store

    with Store(tune_db) as s:
        obs = calibration_observations(s.runs(TUNE), stored_experiment(TUNE, "", s.definition(TUNE)).workloads)
    cals = {server: calibrate(obs, server) for server in {_point(k)[0] for k in labels}}
    return {k: slo_capacity(cals[server], p, t, Goal(REAL_P99_MS), sim=True) for k in labels for server, p, t in [_point(k)]}


def _grid_of(db: str, name: str = GRID) -> tuple[dict[str, tuple[float | None, float | None]], list, float]:
    """A recorded grid: each configuration's capacity (its lower and upper ends) by its plain label,
    its runs, and its wall time (from run to run, a pause of the recording, a gap over a minute, left out)."""
    from arena.app.analysis import analyses
    from arena.results.store import Store

    (a,) = analyses(db, name)
    with Store(db) as s:
        runs = s.runs(name)
    starts = sorted(r.started_at for r in runs)
    wall = sum(min(b - a, 60.0) for a, b in zip(starts, starts[1:])) + 5.0
    return {_plain(label): (cap.lo, cap.hi) for label, _, cap in a.capacities}, runs, wall


def speed_checks(runs) -> list[float]:
    """The machine's speed check around each run (speed.py: a fixed unit of interpreter work, ms)."""
    return [r.speed_ms for r in runs if r.speed_ms is not None]


def real_bench(args) -> int:
    """tune of the same space as the recorded grids, on this machine now, judged by the grids."""
    from arena.results.store import Store

    servers = args.servers.split(",")
    missing = [str(recorded(s)) for s in servers if not recorded(s).exists()]
    if missing:
        sys.exit(f"benchmark: {', '.join(missing)} missing: record with --record SERVER (about 40 minutes each)")
    caps, again, grid_runs, grid_s, grid_speed = {}, {}, 0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        for server in servers:
            grid_db = Path(tmp) / f"{server}.db"
            _gunzip(recorded(server), grid_db)
            c, runs, wall = _grid_of(str(grid_db))
            caps.update(c)
            again.update(_grid_of(str(grid_db), f"{GRID}-again")[0])
            grid_runs, grid_s, grid_speed = grid_runs + len(runs), grid_s + wall, grid_speed + speed_checks(runs)
        t0 = time.monotonic()
        tune = subprocess.run([sys.executable, "-m", "arena", "tune", "--servers", args.servers, "--cpus", "1",
                               "--p99-max", f"{REAL_P99_MS}ms", "--processes", ",".join(map(str, PROCESSES)),
                               "--threads", ",".join(map(str, REAL_THREADS)), "--budget", args.budget,
                               "--store", f"{tmp}/tune.db", "--name", TUNE],
                              capture_output=True, text=True)
        tune_s = time.monotonic() - t0
        with Store(f"{tmp}/tune.db") as s:
            runs = s.runs(TUNE)
        tune_runs, tune_speed = len(runs), speed_checks(runs)
        try:
            predicted = predicted_capacities(f"{tmp}/tune.db", list(caps))
        except ValueError as e:  # tune's calibration runs failed: no model to judge
            predicted = {}
            print(f"the model: tune's calibration: {e}")
    chosen = next((line for line in tune.stdout.splitlines() if line.startswith("chosen: ")), None)
    choice = _plain(chosen.split(": ", 1)[1].split(":", 1)[0]) if chosen else None
    found = {label: (lo, hi) for label, (lo, hi) in caps.items() if lo is not None}
    best = max(found, key=lambda k: found[k][0])
    best_lo = found[best][0]
    # the grids' repeatability: how far the best configurations' capacities moved when measured again
    # (the most of them); tied with the best: a capacity within it of the best's lower measurement
    moved = [abs(again[k][0] / found[k][0] - 1) for k in again if again[k][0] and k in found]
    repeat = max(moved)
    tied = sorted(tied_with_best(found, repeat, {k: lo for k, (lo, _) in again.items()}))
    print(f"recorded full grids: {len(caps)} configurations ({', '.join(servers)}: p={list(PROCESSES)} x "
          f"t={list(REAL_THREADS)}, CPU 1), {grid_runs} runs, {grid_s / 60:.0f} min; best {best} at {best_lo:g} req/s")
    print(f"  measured again, the best {len(moved)} moved by {', '.join(f'{m:.1%}' for m in sorted(moved))}: "
          f"tied with the best (within {repeat:.1%} of its lower measurement): {len(tied)} configurations, "
          + ", ".join(tied))
    aa = max(again, key=lambda k: again[k][0] or 0)
    print(f"  A/A: measured again, the best is {aa}, {found[aa][0] / best_lo:.1%} of the best in the grid, "
          f"{'in' if aa in tied else 'outside'} the tied group")
    print(f"arena tune (same space, budget {args.budget}): {tune_s:.0f} s, exit {tune.returncode}, {tune_runs} runs "
          f"= {tune_runs / grid_runs:.0%} of the grids'; chose {choice}")
    if grid_speed and tune_speed:  # the grids were recorded on another day: a machine of other speed
        then, now = statistics.median(grid_speed), statistics.median(tune_speed)
        print(f"  the machine: its speed check (speed.py, a fixed unit of interpreter work) took a median {now:.2f} ms "
              f"in tune's runs, {then:.2f} ms in the grids' ({now / then:.2f}x): tune's own capacities, and the model "
              "from its calibration, are of the machine as it is now")
    if predicted:
        common, spread = model_off(predicted, {k: lo for k, (lo, _) in found.items()}, lambda k: _point(k)[0], tied)
        print("  the model (tune's calibration) against the grids: its capacities "
              + ", ".join(f"{v:+.1%} for {s}" for s, v in common.items())
              + f" (median); past that, over the {len(tied)} tied configurations it is off by "
              f"{spread:.1%} (sd; the grids' repeatability: {repeat:.1%})")
    if choice is None:
        print(tune.stdout[-2000:] + tune.stderr[-2000:])
        return 1
    lo = found.get(choice, (None, None))[0]
    print(f"  its capacity in the grid: {lo:g} req/s = {lo / best_lo:.1%} of the best; in the tied group: "
          f"{'yes' if choice in tied else 'no'}" if lo else "  its capacity in the grid: none found")
    print("  tune's own figure for it: " + chosen.split(": ", 2)[-1])
    print(f"  time: tune {tune_s / 60:.1f} min against the grids' {grid_s / 60:.0f} min ({tune_s / grid_s:.0%})")
    return 0 if tune.returncode == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", type=int, default=12)
    ap.add_argument("--noise", type=float, default=0.08, help="run-to-run spread of p99 (sd of its log)")
    ap.add_argument("--off", type=float, default=0.1, help="each configuration's p99 off the simulator tune ranks "
                                                          "with (sd of its log; 0: the simulator is the truth)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--converged", action="store_true", help="only whether the configurations tune races hold the "
                                                            "best, against the simulator converged")
    ap.add_argument("--real", action="store_true", help="tune on this machine, judged by the recorded full grid")
    ap.add_argument("--budget", default="10m", help="--real: tune's budget")
    ap.add_argument("--servers", default=",".join(REAL_SERVERS), help="--real: the servers tuned (each recorded)")
    ap.add_argument("--record", metavar="SERVER", choices=REAL_SERVERS,
                    help="run the full grid of SERVER on this machine and record it")
    args = ap.parse_args()
    return (record(args) if args.record else real_bench(args) if args.real else converged_bench(args) if args.converged
            else simulated_bench(args))


if __name__ == "__main__":
    sys.exit(main())
