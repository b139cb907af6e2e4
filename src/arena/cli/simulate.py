"""``arena simulate``: one server or a fleet behind a balancer, simulated: parse -> app.simulate -> render
(``--json``: schemas/simulate.schema.json)."""

import argparse

from rich.table import Table

from arena.app.simulate import simulate_fleet, simulate_server
from arena.results.run_setup import ARRIVALS
from arena.cli.args import count, duration, listof, positive, add_format, print_json
from arena.errors import ArenaError
from arena.model.sim import FLEET_POLICIES, Mean, Summary, parse_dist
from arena.report.model_json import simulate_json

NAME = "simulate"


def _dist(text: str):
    try:
        return parse_dist(text)
    except ArenaError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_dist.__name__ = "--service"


def _policy(text: str) -> str:
    if text not in FLEET_POLICIES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(FLEET_POLICIES)}, got '{text}'")
    return text


_policy.__name__ = "--policy"


def _match(text: str) -> tuple[str, int]:
    policy, _, n = text.rpartition(":")
    if policy not in FLEET_POLICIES or not n.isdigit() or int(n) < 1:
        raise argparse.ArgumentTypeError(f"must be POLICY:INSTANCES with a policy of {', '.join(FLEET_POLICIES)}, "
                                         f"such as central:80, got '{text}'")
    return policy, int(n)


_match.__name__ = "--match"


def add(sub) -> None:
    si = sub.add_parser(NAME, help="simulate one app server (--processes) or a fleet behind a balancer (--instances): "
                                   "throughput, latency percentiles and queue time with confidence intervals")
    what = si.add_mutually_exclusive_group(required=True)
    what.add_argument("--instances", type=count("--instances", 1, 100_000), help="a fleet of this many instances")
    what.add_argument("--processes", type=count("--processes", 1, 4096), help="one server of this many processes")
    si.add_argument("--threads", type=count("--threads", 1, 4096), default=1, help="one server: threads per process")
    si.add_argument("--cores", type=positive("--cores", lo=1, hi=4096), default=1.0, help="one server: its cores")
    si.add_argument("--no-gil", action="store_true", help="one server: a runtime without a GIL")
    si.add_argument("--accept", choices=("shared", "per-process"), default="shared",
                    help="one server: one accept queue, or each connection bound to the process that accepted it")
    si.add_argument("--least-busy", action="store_true",
                    help="one server, --accept per-process: the process with the most free threads accepts "
                         "(Puma); else the one that wins the race, at random")
    si.add_argument("--inline", type=count("--inline", 0, 1_000_000), default=0,
                    help="one server, closed load: requests a thread serves in a row on a kept-alive connection "
                         "while others wait (Puma 5.6: 10; default 0: every request joins the queue)")
    si.add_argument("--blocking-io", action="store_true", help="one server: the I/O wait holds its process")
    si.add_argument("--cpu", type=_dist, help="one server: CPU per request, e.g. exp:mean=5ms")
    si.add_argument("--io", type=_dist, help="one server: I/O wait per request, e.g. fixed:15ms (default none)")
    si.add_argument("--outside", type=duration("--outside", 3600.0), default=0.0,
                    help="one server: time outside it per request (client, network)")
    si.add_argument("--concurrency", type=count("--concurrency", 1, 100_000),
                    help="one server: closed-loop clients (instead of --rate)")
    si.add_argument("--policy", type=listof(_policy), default=["random"],
                    help=f"balancer policies to compare, comma-separated: {', '.join(FLEET_POLICIES)} "
                         "(central: one queue in the balancer, each instance takes --slots at a time)")
    si.add_argument("--slots", type=count("--slots", 1, 4096), default=1, help="requests an instance serves at once")
    si.add_argument("--rate", type=positive("--rate", hi=1e7), help="arrivals per second")
    si.add_argument("--arrival", choices=ARRIVALS, default="poisson",
                    help="with --rate: Poisson arrivals (default) or constant spacing (arena-load's open model)")
    si.add_argument("--service", type=_dist,
                    help="service time, e.g. weibull:shape=0.46,median=50ms,min=10ms,max=30s or lognormal:mean=50ms,sigma=1.5")
    si.add_argument("--duration", type=duration("--duration", 24 * 3600.0), default=300.0,
                    help="simulated time per replication (default 5m)")
    si.add_argument("--replications", type=count("--replications", 1, 100), default=5)
    si.add_argument("--seed", type=count("--seed", 0, 2**63), default=1)
    si.add_argument("--match", type=_match, help="POLICY:N: also find how many instances each --policy needs to "
                                                 "reach the mean queue time POLICY reaches with N")
    add_format(si, NAME)
    si.add_argument("--within", type=duration("--within", 3600.0), default=0.001,
                    help="with --match: mean queue times this close count as reached (default 1ms: a central "
                         "queue's mean wait can be near zero, which random routing reaches only in the limit)")


def _ms(e: Mean) -> str:
    return f"{e.mean * 1e3:.1f} ({e.lo * 1e3:.1f}-{e.hi * 1e3:.1f})"


def _row(s: Summary) -> list[str]:
    return [f"{s.throughput.mean:.1f}", _ms(s.wait_mean), *(_ms(s.response[q]) for q in ("p50", "p90", "p99", "p99.9")),
            _ms(s.wait["p99"])]


COLUMNS = ("req/s", "queue mean ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "queue p99 ms")


def _arrivals(args) -> str:
    return f"{'Poisson' if args.arrival == 'poisson' else 'evenly spaced'} arrivals at {args.rate:g}/s"


def _how(requests: int, replications: int) -> str:
    return f"{requests} requests x {replications} replications (the first 10% of each left out); mean (95% interval)"


def run(args, out) -> int:
    if args.processes is not None:
        return run_instance(args, out)
    done = simulate_fleet(args.instances, args.policy, args.rate, args.service, slots=args.slots,
                          duration_s=args.duration, replications=args.replications, seed=args.seed,
                          arrival=args.arrival, match=args.match, within_s=args.within)
    if args.format == "json":
        doc = simulate_json("fleet", done.requests, done.replications, done.by_policy, done.matched)
        print_json(doc)
        return 0
    out.print(f"{args.instances} instance(s) x {args.slots} slot(s), {_arrivals(args)}, "
              f"service {args.service.text}; {_how(done.requests, done.replications)}", highlight=False)
    table = Table("policy", *COLUMNS)
    for policy, summary in done.by_policy.items():
        table.add_row(policy, *_row(summary))
    out.print(table)
    if done.matched:
        m = done.matched
        out.print(f"mean queue time of {m.policy} with {m.instances} instances: {m.reached_s * 1e3:.3f} ms; instances "
                  f"each policy needs for a mean queue time within {m.within_s * 1e3:g} ms of it:", highlight=False)
        for p, need in m.needs.items():
            out.print(f"  {p:12} {need if need is not None else 'more than 100000'}", highlight=False)
    return 0


def run_instance(args, out) -> int:
    done = simulate_server(args.processes, args.threads, args.cores, gil=not args.no_gil, accept=args.accept,
                           least_busy=args.least_busy, inline=args.inline, blocking_io=args.blocking_io, cpu=args.cpu,
                           io=args.io, outside_s=args.outside, clients=args.concurrency, rate=args.rate,
                           arrival=args.arrival, duration_s=args.duration, replications=args.replications,
                           seed=args.seed)
    if args.format == "json":
        doc = simulate_json("server", done.requests, done.replications, {"server": done.summary})
        print_json(doc)
        return 0
    inst, work = done.instance, done.work
    load = f"{args.concurrency} closed-loop clients" if args.concurrency else _arrivals(args)
    out.print(f"{args.processes} process(es) x {args.threads} thread(s) on {args.cores:g} core(s), "
              f"{'a GIL per process' if inst.gil else 'no GIL'}, {done.discipline}; CPU {args.cpu.text}, "
              f"I/O {work.io.text}{', holding the process' if inst.blocking_io else ''}, outside "
              f"{args.outside * 1e3:g} ms; {load}; {_how(done.requests, done.replications)}", highlight=False)
    table = Table(*COLUMNS)
    table.add_row(*_row(done.summary))
    out.print(table)
    return 0
