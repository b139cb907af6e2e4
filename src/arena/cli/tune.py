"""``arena tune``: a configuration to deploy for an app, its CPUs, memory and latency target, measured
within a budget; ``--write DIR`` writes the server's config files."""

from __future__ import annotations

import os
from pathlib import Path

from arena import __version__
from arena.atomic import staging
from arena.app.tune import BUDGET_S, DURATION_S, ERROR_PCT, Request, tune
from arena.cli.args import (EXIT_FAILED, MODEL_CLIENTS, add_format, add_goal, add_limits, add_share, add_store, add_user_app,
                            count, cpus, duration, limits_of, listof, positive, print_json, reap_first, saying,
                            user_app_options)
from arena.cpus import format_cpu_list
from arena.errors import ArenaError
from arena.mix import load_mix
from arena.plan.experiment import Level
from arena.report.tune_view import answer_lines, calibration_lines, evidence, sureness_lines, tune_json
from arena.servers import catalog, deploy
from arena.servers.launch import app_bundle
from arena.subjects.user import app_for
from arena.traffic.read import profile_times

NAME = "tune"


def add(sub) -> None:
    tu = sub.add_parser(NAME, help="find the configuration to deploy: calibrate, predict, race the best, find capacity")
    tu.add_argument("--app", help="a built-in subject app, or your own: config.ru or module:callable "
                                  "(default: the subject app each server serves)")
    add_user_app(tu)
    what = tu.add_mutually_exclusive_group()
    what.add_argument("--path", help="the request to measure (default: the subject's /work?cpu_ms=5&io_ms=10; "
                                     "your own app's /)")
    what.add_argument("--mix", help="a request mix file (TOML) instead of one path")
    tu.add_argument("--profile", nargs="+", metavar="LOG",
                    help="access logs whose arrival shape the open loads follow (their rate over time, their "
                         "bursts): the capacity is then the highest mean rate within the goal under that shape")
    tu.add_argument("--cpus", type=cpus, required=True, help="the server's CPUs, e.g. 1 or 1-3")
    tu.add_argument("--load-cpus", type=cpus, help="the load generator's CPUs (default: every other CPU)")
    add_share(tu)
    add_limits(tu)
    add_goal(tu, required=True)
    tu.add_argument("--servers", type=listof(str), help="only these servers, e.g. puma,gunicorn-gthread "
                                                         "(default: every installed server that serves the app)")
    tu.add_argument("--processes", "-w", "--workers", type=listof(count("--processes", 1, 256)), metavar="LIST",
                    help="only these process counts, e.g. 1,2,4 (default: 1 to 4 x the CPUs, at least 8)")
    tu.add_argument("--threads", "-t", type=listof(count("--threads", 1, 4096)), metavar="LIST",
                    help="only these thread counts, e.g. 1,4,16 (default: 1 to 32, the model's steps)")
    load = tu.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=count("--concurrency", 1, MODEL_CLIENTS),
                      help="a fixed closed load of N clients (default: find each finalist's capacity)")
    load.add_argument("--rate", type=positive("--rate", hi=1e7), help="a fixed open load, requests/s")
    tu.add_argument("--budget", type=duration("--budget", 24 * 3600), default=BUDGET_S,
                    help=f"wall time for the whole tune, e.g. 5m (default {BUDGET_S / 60:.0f}m)")
    tu.add_argument("--duration", type=duration("--duration", 3600), default=DURATION_S,
                    help=f"measured time of each run (default {DURATION_S:g}s)")
    tu.add_argument("--name", help="the experiment its runs are stored as (default: tune- and a hash of the request)")
    tu.add_argument("--write", metavar="DIR", help="write the chosen configuration's files here: the server's config "
                                                   "(puma.rb, gunicorn.conf.py, ...), run.sh, arena.env; under "
                                                   "--cpu-limit/--memory-limit also kubernetes.yaml and docker-run.sh")
    add_store(tu)
    add_format(tu, NAME, "json: the answer alone on standard output, at the end; the steps go to standard error")


def run(args, out) -> int:
    request = _request(args)
    if args.write and Path(args.write).exists() and not Path(args.write).is_dir():
        raise ArenaError(f"--write {args.write}: not a directory")
    out = saying(out, args)
    reap_first(out)
    say = lambda text: out.print(text, highlight=False, markup=False)  # noqa: E731
    limits = f" under {request.limits.text}" if request.limits.any else ""
    say(f"arena tune on CPUs {format_cpu_list(request.server_cpus)}{limits} "
        f"(load on {format_cpu_list(request.load_cpus)}); "
        f"goal: {request.goal}; " + ("capacity" if request.load is None else f"load {request.load.label}")
        + f"; budget {request.budget_s:g} s; store {args.store}")

    def on_event(e) -> None:
        if e.kind == "failed":
            say(f"    {e.run.key}: FAILED: {e.message}")

    tuned = tune(request, args.store, on_event=on_event, on_step=lambda text: say(f"  {text}"))
    if args.format == "json":
        print_json(tune_json(tuned))
    else:
        say("calibration:")
        for line in calibration_lines(tuned):
            say(line)
        for line in answer_lines(tuned) + sureness_lines(tuned):
            say(line)
    say(f"runs stored as experiment {tuned.experiment}: arena show {tuned.experiment} --store {args.store}")
    if tuned.chosen is None:
        return EXIT_FAILED
    if args.write:
        ch = tuned.chosen
        where = os.path.relpath(args.write)  # run.sh's path from the app's directory, where it is started
        chosen = deploy.Deployment(ch.server, ch.app, ch.processes, ch.threads, bundled=app_bundle(ch.app) is not None,
                                   limits=request.limits,
                                   directory=Path(args.write).name if where.startswith("..") else where)
        try:
            files = deploy.files(chosen, evidence(tuned, __version__))
        except ValueError as e:  # a configuration its server cannot be given in a file (said why)
            raise ArenaError(f"--write {args.write}: {e}") from None
        with staging(args.write, "--write") as stage:  # every file, or none
            for name, text in files.items():
                (stage / name).write_text(text)
                if name.endswith(".sh"):
                    (stage / name).chmod(0o755)
        say(f"wrote {', '.join(os.path.join(args.write, n) for n in files)}")
    return 0


def _request(args) -> Request:
    server_cpus = tuple(args.cpus)
    load_cpus = tuple(args.load_cpus) if args.load_cpus else tuple(sorted(os.sched_getaffinity(0) - set(server_cpus)))
    if not load_cpus and args.share_cpus:
        load_cpus = server_cpus
    if not load_cpus:
        raise ArenaError(f"--cpus {format_cpu_list(server_cpus)}: leaves no CPU for the load generator "
                         "(give the server fewer, or --load-cpus, or share them knowingly: --share-cpus)")
    if set(load_cpus) & set(server_cpus) and not args.share_cpus:
        raise ArenaError(f"--load-cpus {format_cpu_list(load_cpus)}: must not overlap --cpus, unless --share-cpus "
                         "(the generator's cost then counts in the figures)")
    for name in args.servers or []:
        if name not in catalog.CATALOG:
            try:
                catalog.get_server(name)
            except ArenaError as e:  # its did-you-mean, under the flag's name
                raise ArenaError(f"--servers {name}: {str(e).removeprefix('server: ')}") from None
    if args.mix:
        load_mix(args.mix)  # a mix that is not there or does not parse: one line, now
    serves = {i for n in (args.servers or catalog.CATALOG) for i in catalog.get_server(n).interfaces}
    options = user_app_options(args)
    app = app_for(args.app, serves, **options)  # a user's app that is not there or does not import: one line, now
    if getattr(app, "user", None) is not None:  # a Python app's given or found by importing it; rack for a
        options["interface"] = app.interface  # config.ru or its directory: each server is given that one
    load = (Level("closed", args.concurrency) if args.concurrency else Level("open", args.rate) if args.rate else None)
    if args.profile:  # read now: a log that is none is refused before any server starts
        try:
            profile_times(tuple(str(Path(f).resolve()) for f in args.profile))
        except ArenaError as e:
            raise ArenaError(f"--profile {e}") from None
    if args.profile and args.concurrency:
        raise ArenaError("--profile, --concurrency: a profile shapes an open load (a capacity, or --rate)")
    return Request(server_cpus, load_cpus, args.p99_max, args.memory_max,
                   ERROR_PCT if args.error_max is None else args.error_max, tuple(args.servers or ()), load,
                   args.app, options, args.path, args.mix, args.budget, args.duration, name=args.name,
                   processes=tuple(sorted(set(args.processes or ()))), threads=tuple(sorted(set(args.threads or ()))),
                   limits=limits_of(args), profile=tuple(args.profile or ()))
