"""``arena load``: arena-load at a URL, an ab/wrk-style summary."""

from arena.app.load import load
from arena.cli.args import reap_first, EXIT_FAILED, EXIT_INTERRUPTED, add_share, count, cpus, duration, positive, rate
from arena.cpus import format_cpu_list
from arena.results.runs import SHARED
from arena.app.traffic import profile
from arena.drivers.spec import LoadSpec
from arena.results.run_setup import ARRIVALS
from arena.errors import ArenaError
from arena.traffic.logs import FORMATS
from arena.clients import MAX_DELAY_S
from arena.plan.reader import MAX_DURATION_S, MAX_TIMEOUT_S, MAX_WARMUP_S
from arena.mix import load_mix
from arena.report.summary import load_summary

NAME = "load"


def add(sub) -> None:
    lo = sub.add_parser(NAME, help="drive load at a URL with arena-load and print an ab/wrk-style summary")
    lo.add_argument("url", help="http://host:port/path (loopback unless --allow-remote)")
    lo.add_argument("-c", "--connections", type=count("--connections", 1, 1_000_000),
                    help="closed model: connections (default 10); open model: the most opened (default 1000)")
    lo.add_argument("-r", "--rate", type=positive("--rate"), help="open model: arrivals per second")
    lo.add_argument("--arrival", choices=ARRIVALS, default=ARRIVALS[0], help="open model arrivals")
    lo.add_argument("-d", "--duration", type=duration("--duration", MAX_DURATION_S), help="measured time, e.g. 10s (default 10s)")
    lo.add_argument("-n", "--requests", type=count("--requests", 1, 10**12), help="measured requests")
    lo.add_argument("--warmup", type=duration("--warmup", MAX_WARMUP_S), default=0.0, help="warm-up, kept apart (e.g. 2s)")
    lo.add_argument("--think", type=duration("--think", MAX_TIMEOUT_S), default=0.0, help="closed model: pause between requests")
    lo.add_argument("-t", "--threads", type=count("--threads", 1, 256), default=1, help="generator threads")
    lo.add_argument("-m", "--method", default="GET")
    lo.add_argument("-H", "--header", action="append", default=[], dest="headers", help="'Name: value' (repeatable)")
    lo.add_argument("--body")
    lo.add_argument("--mix", help="a request mix file (TOML or JSON): weighted requests, path templates such as "
                                  "/posts/{id:1..10000}")
    lo.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    lo.add_argument("--delay", type=duration("--delay", MAX_DELAY_S), default=0.0,
                    help="emulate a far client: one-way delay each way, e.g. 20ms")
    lo.add_argument("--upload", type=rate("--upload"), help="emulate a slow client: bytes per second sent, e.g. 64KiB/s")
    lo.add_argument("--download", type=rate("--download"), help="emulate a slow client: bytes per second read, e.g. 256KiB/s")
    lo.add_argument("--request-start", action="store_true", help="stamp X-Request-Start at the real send time")
    lo.add_argument("--timeout", type=duration("--timeout", MAX_TIMEOUT_S), default=30.0, help="response timeout (default 30s)")
    lo.add_argument("--connect-timeout", type=duration("--connect-timeout", MAX_TIMEOUT_S), default=5.0)
    lo.add_argument("--seed", type=count("--seed", 0, 2**63), default=1)
    lo.add_argument("--cpus", type=cpus, help="CPU list for the generator (kept apart from the server's: one it may "
                                              "run on is refused unless --share-cpus)")
    add_share(lo)
    lo.add_argument("--json", help="also write arena-load's JSON result to this file (with --cluster: the merged "
                                   "result and each host's)")
    lo.add_argument("--allow-remote", action="store_true", help="allow a target that is not loopback")
    lo.add_argument("--cluster", metavar="ADDRESS",
                    help="a Dask scheduler (tcp://host:port): the load comes from its workers offering the arena-load "
                         "resource, each with its share, started together, their histograms merged exactly; the URL "
                         "is loopback or one of the cluster's hosts")
    lo.add_argument("--expect-status", help="statuses that count as success, e.g. 2xx,404 (default 2xx,3xx)")
    lo.add_argument("--events", type=count("--events", 1, 100_000),
                    help="the events each stream of server-sent events should hold: one that ends with fewer is an "
                         "error (short); a text/event-stream answer's first byte, events and gaps are timed either way")
    lo.add_argument("--profile", nargs="+", metavar="LOG",
                    help="open model at the arrival times of access logs (the formats of arena mix from-log): "
                         "their requests per second over time and their bursts within each second; --rate is "
                         "then the mean rate to scale it to")
    lo.add_argument("--speed", type=speed, help="--profile: send the log this many times faster, e.g. 10x")
    lo.add_argument("--window", help="--profile: busiest:DURATION (the span with the most requests) or "
                                     "first:DURATION, e.g. busiest:10m (default: the whole log)")
    lo.add_argument("--log-format", choices=FORMATS, help="--profile: the logs' format (default: detected)")


def speed(text: str) -> float:
    """``10x``, ``0.5x`` or ``10``: how many times faster than the log."""
    return positive("--speed", hi=1e6, what="a speed-up such as 10x")(text.removesuffix("x"))


def run(args, out) -> int:
    reap_first(out)
    for flag, given in (("--speed", args.speed), ("--window", args.window), ("--log-format", args.log_format)):
        if given is not None and not args.profile:
            raise ArenaError(f"{flag}: applies to --profile (a log's arrival times)")
    if args.profile and args.cluster:
        raise ArenaError("--profile, --cluster: a profile is sent from one load host")
    if args.profile and args.speed is not None and args.rate is not None:
        raise ArenaError("--speed, --rate: give one (with --profile, --rate is the mean rate to scale it to)")
    shaped = (profile(args.profile, fmt=args.log_format, speed=args.speed or 1.0, rate=args.rate, window=args.window,
                      seed=args.seed) if args.profile else None)
    if shaped is not None:
        s = shaped.schedule
        out.print(f"profile: {len(s.times):,} sends over {s.span_s:.1f} s ({s.source_span_s:.0f} s of the log"
                  f"{' ' + shaped.window if shaped.window else ''} at {s.speed:.3g}x), mean {s.mean_rate:.1f}/s, "
                  f"p99 of sends per second {s.peak():.0f} (the log's own: {shaped.source.peak():.0f} at 1x)",
                  highlight=False, markup=False)
    spec = LoadSpec(
        url=args.url, connections=args.connections,
        requests=args.requests, warmup_s=args.warmup, think_ms=args.think * 1000, threads=args.threads,
        method=args.method, headers=args.headers, body=args.body, mix=load_mix(args.mix) if args.mix else None,
        keep_alive=not args.no_keepalive, delay_s=args.delay, upload_bps=args.upload, download_bps=args.download,
        request_start=args.request_start, connect_timeout_s=args.connect_timeout,
        timeout_s=args.timeout, seed=args.seed, allow_remote=args.allow_remote, expect_status=args.expect_status,
        events=args.events,
        **(shaped.load(args.duration, args.warmup) if shaped
           else dict(rate=args.rate, arrival=args.arrival, duration_s=args.duration)))
    loaded = load(spec, cpus=args.cpus, json_path=args.json, cluster=args.cluster, share=args.share_cpus)
    print(load_summary(loaded.result))
    if loaded.shared:
        print(f"{SHARED} (the generator and the server shared CPU(s) {format_cpu_list(loaded.shared)})")
    if loaded.result.interrupted:
        return EXIT_INTERRUPTED
    if loaded.flags:
        print("INVALID: " + "; ".join(loaded.flags))
        return EXIT_FAILED
    return 0
