"""``arena run``: an experiment file into the store (resumable), with progress."""

import argparse
import os

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from arena.app.decide import BUDGET_S, MAX_REPETITIONS, run_until_decided
from arena.app.run import run_file
from arena.cpus import format_cpu_list
from arena.errors import ArenaError
from arena.results.runs import SHARED
from arena.report.tune_view import capacity_lines
from arena.cli.args import (note_unused_environment, reap_first, EXIT_FAILED, EXIT_THRESHOLD, add_limits, add_share,
                            add_store, count, duration, overrides_of, warn)

NAME = "run"


def add(sub) -> None:
    ru = sub.add_parser(NAME, help="run an experiment file (resumes: finished runs are not repeated)")
    ru.add_argument("experiment", help="experiment file (TOML), e.g. scenarios/quick.toml")
    add_store(ru)
    ru.add_argument("--dry-run", action="store_true", help="print the plan and its estimated time, run nothing")
    ru.add_argument("--shard", type=shard_of, metavar="i/N",
                    help="run only this share of the plan (1-based; 'auto': a Slurm array's task, 'auto/N': a "
                         "Kubernetes Indexed Job's); merge the shards' stores with arena merge")
    add_retake(ru)
    add_share(ru)
    add_limits(ru)  # over every [[servers]] entry's, as if the file said them
    ru.add_argument("--until-decided", action="store_true",
                    help="after the planned repetitions, repeat only the cells whose comparison with the best is "
                         "undecided, until decided (within --max-repetitions and --budget)")
    ru.add_argument("--max-repetitions", type=count("--max-repetitions", 2, 100), default=MAX_REPETITIONS,
                    help=f"--until-decided: at most this many repetitions of a cell (default {MAX_REPETITIONS})")
    ru.add_argument("--budget", type=duration("--budget", 24 * 3600), default=BUDGET_S,
                    help=f"--until-decided: wall time for the whole invocation, e.g. 20m (default {BUDGET_S / 60:.0f}m)")


def add_retake(p) -> None:
    p.add_argument("--retake-invalid", action="store_true",
                   help="also take again each run whose stored attempts are all invalid (a slow spell of the machine, "
                        "errors); the new attempt is stored beside them, nothing is replaced")


def shard_of(text: str):
    """--shard: i/N, auto or auto/N (plan/shard.py), read against this process's environment."""
    from arena.plan.shard import parse

    try:
        return parse(text, os.environ)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def run(args, out) -> int:
    if args.until_decided and args.shard:
        raise ArenaError(f"--until-decided: not with --shard {args.shard} (the rounds need every shard's runs: "
                         "merge the shards, then run --until-decided on the merged store)")
    if args.until_decided and not args.dry_run:
        return _until_decided(args, out)
    step = lambda text: out.print(f"  {text}", highlight=False, markup=False)  # noqa: E731
    counts, names = with_progress(out, args.store, args.dry_run,
                                  lambda planned, on_event: run_file(args.experiment, args.store, planned, on_event,
                                                                     dry_run=args.dry_run,
                                                                     retake_invalid=args.retake_invalid, on_step=step,
                                                                     shard=args.shard, overrides=overrides_of(args)))
    if counts is None:
        return 0
    return summary(out, counts, names[0], args.store)


def _until_decided(args, out) -> int:
    from arena.app.run import plan_file

    if plan_file(args.experiment, overrides=overrides_of(args)).experiment.find:
        raise ArenaError(f"--until-decided: {args.experiment} searches capacities ([load] find); run it without")
    def on_round(r) -> None:
        out.print(f"until decided, round {r.number}: {len(r.wanted)} run(s) beyond the plan", highlight=False)
        for why in dict.fromkeys(why for _, why in r.wanted.values()):
            out.print(f"  {why}", highlight=False, markup=False)

    decided, names = with_progress(out, args.store, False, lambda planned, on_event: run_until_decided(
        args.experiment, args.store, planned, on_event, on_round, retake_invalid=args.retake_invalid,
        most=args.max_repetitions, budget_s=args.budget, overrides=overrides_of(args)))
    out.print(f"until decided: {decided.rounds} round(s), {decided.extra_runs} run(s) beyond the plan; stopped: "
              f"{decided.stopped}" + (f"; still undecided: {', '.join(decided.undecided)}" if decided.undecided else ""),
              highlight=False, markup=False)
    return summary(out, decided.counts, names[0], args.store)


def with_progress(out, store: str, dry_run: bool, call):
    """Run ``call(on_plan, on_event)`` (an engine call that plans and runs an experiment file) with
    the plan printed, a progress bar and a line per run; returns its counts and the experiment's name."""
    def planned(p) -> None:
        exp = p.experiment
        levels = sum(len(w.levels or exp.levels) for w in exp.workloads)  # workload x level pairs
        shape = (f"{len(exp.workloads)} workloads x {len(exp.levels)} levels" if not any(w.levels for w in exp.workloads)
                 else f"{levels} workload levels")
        share = "" if p.shard is None else f"shard {p.shard}: {len(p.groups)} of its {p.starts} server starts, "
        what = (f"{shape} x {exp.repetitions} repetitions; {share}about {p.estimate_s / 60:.0f} min" if not exp.find else
                f"{len(exp.workloads)} workloads: the capacity within {exp.goal} searched for each")
        out.print(f"experiment {exp.name}: {len(exp.servers)} configurations x {what}; server CPUs "
                  f"{list(exp.server_cpus)}, load CPUs {list(exp.load_cpus)}; store {os.path.abspath(store)}",
                  highlight=False)
        if exp.shared:
            out.print(f"every run: {SHARED} (the server and the load share CPUs {format_cpu_list(exp.server_cpus)})",
                      highlight=False, markup=False)
        for app in {c.user_app.name: c.user_app for c in exp.servers if c.user_app}.values():
            warn(out, app)
        if dry_run:
            for i, g in enumerate(p.groups, 1):
                out.print(f"start {i}: {escape(g.config.name)} #{g.repetition}: "
                          + ", ".join(escape(r.key.split(' ', 1)[1]) for r in g.runs), highlight=False)
        else:
            reap_first(out)
            note_unused_environment(out)
        names.append(exp.name)

    names: list[str] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=out, transient=False, disable=dry_run) as progress:
        task = progress.add_task("runs", total=None, last="")

        def on_event(e) -> None:
            if e.kind == "live":  # the run in progress, each second: its req/s and p99 in that second
                p99 = f"{e.point.p99_us / 1000:.1f} ms" if e.point.p99_us is not None else "-"
                progress.update(task, last=f"{e.run.key} ({e.point.t + 1:.0f}s): {e.point.completed:.0f} req/s, p99 {p99}")
                return
            progress.update(task, total=e.total, completed=e.index)
            if e.kind == "run":
                m = e.result.measured
                p99 = m.response_time.p("99") if m.response_time else None
                mark = ("" if not e.flags else "  INVALID: " + "; ".join(e.flags)) + (f"  ({SHARED})" if e.shared else "")
                progress.update(task, last=f"{e.run.key}: {m.achieved_rps:.0f} req/s, p99 {_ms(p99, 0, 1)}")
                progress.console.print(f"  {e.run.key}: {m.achieved_rps:8.1f} req/s  p99 {_ms(p99, 8, 2)}{mark}",
                                       highlight=False, markup=False)
                db = e.db.note() if e.db else None
                if db:
                    progress.console.print(f"    {db}", highlight=False, markup=False)
                quota = e.resources and e.resources.cpu_throttled_periods
                if quota:  # a CPU quota held it back
                    throttled_ms = e.resources.cpu_throttled_s * 1000
                    progress.console.print(f"    throttled {throttled_ms:.0f} ms by its CPU quota, in {quota} of "
                                           f"{e.resources.cpu_periods} periods", highlight=False, markup=False)
            elif e.kind == "failed":
                progress.console.print(f"  {e.run.key}: FAILED: {e.message}", highlight=False, markup=False)

        counts = call(planned, on_event)
    return counts, names


def _ms(us: int | None, width: int, digits: int) -> str:
    """Microseconds as milliseconds; "-" where the driver does not measure the figure (siege has no
    percentiles): never a zero that was not measured."""
    return f"{'-':>{width}}   " if us is None else f"{us / 1000:{width}.{digits}f} ms"


def summary(out, counts, name: str, store: str) -> int:
    """The closing lines of a run, and its exit code: failed or invalid runs are not a success
    (EXIT_FAILED); with every run valid, a failed threshold of the experiment is EXIT_THRESHOLD."""
    from arena.app.analysis import analyses
    from arena.report.answer_view import threshold_lines

    out.print(f"{counts.done} runs done ({counts.invalid} invalid), {counts.skipped} already in the store, "
              f"{counts.failed} failed; results in {store} (arena show {name} --store {store})", highlight=False)
    (analysis,) = analyses(store, name)
    for line in capacity_lines(analysis.capacities) + threshold_lines(analysis.thresholds):
        out.print(line, highlight=False, markup=False)
    if counts.failed or counts.invalid or analysis.without_capacity:
        return EXIT_FAILED
    return EXIT_THRESHOLD if analysis.failed_thresholds else 0
