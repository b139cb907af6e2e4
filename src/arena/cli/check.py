"""``arena check``: conformance of every server and app (``--json``: schemas/check.schema.json)."""

from rich.markup import escape
from rich.table import Table

from arena.app.check import check
from arena.services import KINDS
from arena.cli.args import (note_unused_environment, reap_first, EXIT_FAILED, add_knobs, add_limits, add_user_app,
                            add_format, limits_of, print_json, saying, user_app_options)

NAME = "check"


def add(sub) -> None:
    c = sub.add_parser(NAME, help="start each server with each app, run the conformance requests, stop")
    c.add_argument("servers", nargs="*", metavar="SERVER", help="servers to check (default: all)")
    c.add_argument("--app", action="append", dest="apps",
                   help="only this app (repeatable): a built-in one, or your own (a config.ru or module:callable)")
    add_knobs(c)
    add_limits(c)
    add_user_app(c)
    c.add_argument("--service", action="append", default=[], choices=KINDS, dest="services",
                   help="start this service first and point every server at it (repeatable): postgres, http")
    add_format(c, NAME, "json: printed at the end, instead of the table")


def run(args, out) -> int:
    out = saying(out, args)  # with --json: notes and warnings go to standard error
    table = Table(title="arena check: conformance of every server and app")
    for col in ("server", "app", "result", "version", "knobs", "start-up", "PSS", "procs", "stream", "problems"):
        table.add_column(col, overflow="fold")

    warned: set[str] = set()

    def row(r) -> None:
        for line in (w for w in r.app_warnings if w not in warned):
            warned.add(line)
            out.print(f"warning: {line}", highlight=False, markup=False)
        mark = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skip[/]"}[r.status]
        knobs = " ".join(f"{k[0]}={v}" for k, v in r.knobs.items() if v is not None) or "-"
        table.add_row(r.server, r.app, mark, r.version or "-", knobs,
                      f"{r.startup_s:.2f} s" if r.startup_s is not None else "-",
                      f"{r.pss_bytes / 2**20:.1f} MiB" if r.pss_bytes else "-",
                      str(r.processes or "-"), escape(r.stream or "-"), escape("; ".join(r.problems)[:400]))
        why = f": {r.problems[0]}" if r.status != "pass" and r.problems else ""
        if args.format != "json":
            out.print(f"{r.server:17} {r.app:8} {r.status}{why}", highlight=False, markup=False)

    reap_first(out)
    note_unused_environment(out)
    results = check(args.servers or None, args.apps, user=user_app_options(args), processes=args.processes, threads=args.threads,
                    cpus=args.cpus, limits=limits_of(args), services=args.services, on_result=row,
                    on_service=lambda svc: out.print(f"service: {svc.describe()} at {svc.address}", highlight=False, markup=False))
    failed = sum(r.status == "fail" for r in results)
    skipped = sum(r.status == "skip" for r in results)
    if args.format == "json":
        doc = {"schema": "arena/check/1", "passed": len(results) - failed - skipped, "failed": failed, "skipped": skipped,
               "results": [{"server": r.server, "app": r.app, "status": r.status, "version": r.version,
                            "knobs": r.knobs, "startup_s": r.startup_s, "pss_bytes": r.pss_bytes,
                            "processes": r.processes, "stream": r.stream, "problems": list(r.problems)}
                           for r in results]}
        print_json(doc)
        return EXIT_FAILED if failed else 0
    out.print(table)
    out.print(f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return EXIT_FAILED if failed else 0
