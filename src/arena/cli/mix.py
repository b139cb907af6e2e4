"""``arena mix from-log``: a request mix from access logs (app/traffic.py)."""

from arena.app.traffic import from_log
from arena.cli.args import positive
from arena.traffic.logs import FIELDS, FORMATS
from arena.traffic.templates import DEFAULT_COVERAGE

NAME = "mix"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="make a request mix file from your own traffic")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    f = actions.add_parser("from-log", help="access logs (nginx/Apache combined or common, JSON lines, vegeta "
                                            "targets, HAR files; gzipped too) -> a mix of request templates weighted by "
                                            "their counts")
    f.add_argument("files", nargs="+", metavar="FILE")
    f.add_argument("-o", "--output", required=True, help="the mix file to write (TOML)")
    f.add_argument("--format", choices=FORMATS, help="the logs' format (default: detected from each file's first lines)")
    f.add_argument("--fields", metavar="FIELD=KEY,...",
                   help=f"JSON lines: the keys that hold each field ({', '.join(FIELDS)}), such as "
                        "method=verb,path=uri")
    f.add_argument("--coverage", type=positive("--coverage", hi=1.0, what="a share"), default=DEFAULT_COVERAGE,
                   help=f"write the most frequent templates covering this share of the requests (default "
                        f"{DEFAULT_COVERAGE:g}); the rest are counted")
    f.add_argument("--include", metavar="REGEX", help="only requests whose path and query match (static assets "
                                                      "and health checks then too, where they match)")
    f.add_argument("--exclude", metavar="REGEX", help="leave out requests whose path and query match")
    f.add_argument("--all-paths", action="store_true", help="keep static assets and health checks")
    f.add_argument("--keep-values", action="store_true",
                   help="write the log's values as they are: query values that are no number, words and "
                        "user data in paths, every range and a HAR's headers (user data: left out by default; "
                        "docs/reference/apps.md)")


def run(args, out) -> int:
    r = from_log(args.files, args.output, fmt=args.format, fields=args.fields, coverage=args.coverage,
                 include=args.include, exclude=args.exclude, keep_values=args.keep_values, all_paths=args.all_paths)
    b = r.built
    span = f" over {_span(r.span_s)}" if r.span_s is not None else ""
    got = r.read
    formats = ", ".join(sorted(set(got.formats.values())))
    read = (f"{len(got.formats)} HAR file{'s' if len(got.formats) != 1 else ''}" if formats == "har"  # one JSON document each
            else f"{got.lines:,} line{'s' if got.lines != 1 else ''} ({formats})")
    what = "entries" if formats == "har" else "lines"
    out.print(f"read {read}{span}: {b.read:,} requests, {got.skipped:,} {what} skipped"
              + (f" (first: {got.first_skip})" if got.first_skip else ""), highlight=False, markup=False)
    for why, (n, where) in got.skips.items() if len(got.skips) > 1 or got.skipped > 1 else ():
        more = f", ... {n - len(where):,} more" if n > len(where) else ""
        unit = what if n != 1 else {"lines": "line", "entries": "entry"}[what]
        out.print(f"  {n:,} {unit}: {why} ({', '.join(where)}{more})", highlight=False, markup=False)
    left = [(n, what) for n, what in ((b.static, "static assets"), (b.health, "health checks"),
                                       (b.excluded, "excluded by --include/--exclude"),
                                       (b.tokens, "with a token longer than arena-load draws (64 characters)"),
                                       (b.failed_only, "of templates that only answered 5xx")) if n]
    if left:
        out.print("left out: " + "; ".join(f"{n:,} {what}" for n, what in left), highlight=False, markup=False)
    kept = b.written + sum(t.count for t in b.beyond)
    out.print(f"{len(b.kept)} template{'s' if len(b.kept) != 1 else ''} cover{'s' if len(b.kept) == 1 else ''} {b.written:,} of {kept:,} requests ({100 * b.written / kept:.1f}%)"
              + (f"; {len(b.beyond)} rarer ones left out ({kept - b.written:,} requests)" if b.beyond else ""),
              highlight=False, markup=False)
    if b.bodies_dropped:
        out.print(f"request bodies left out (neither JSON nor a form; --keep-values writes them): "
                  f"{b.bodies_dropped:,}", highlight=False, markup=False)
    if b.headers_dropped:
        out.print("request headers left out (they say who, not what the client accepts; --keep-values writes them): "
                  + ", ".join(f"{k} ({n:,})" for k, n in b.headers_dropped.most_common(8)), highlight=False, markup=False)
    if b.dropped_params:
        out.print("query values left out (user data; --keep-values writes them): "
                  + ", ".join(f"{k} ({n:,})" for k, n in b.dropped_params.most_common(8)), highlight=False, markup=False)
    for t in b.kept[:10]:
        out.print(f"  {100 * t.count / b.written:5.1f}%  {t.method:6} {t.path}", highlight=False, markup=False)
    if len(b.kept) > 10:
        out.print(f"  ... and {len(b.kept) - 10} more in {r.output}", highlight=False, markup=False)
    out.print(f"wrote {r.output} (use it as [workload] mix = \"{r.output}\", or arena load --mix {r.output})",
              highlight=False, markup=False)
    return 0


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 60:.1f} minutes" if seconds >= 120 else f"{seconds:.0f} s"
