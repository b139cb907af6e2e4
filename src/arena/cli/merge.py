"""``arena merge``: the stores of a sharded experiment into one."""

from arena.app.merge import merge

NAME = "merge"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="merge the stores of a sharded experiment (arena run --shard i/N) into one")
    p.add_argument("shards", nargs="+", metavar="STORE", help="the shards' stores, e.g. shard-*.db")
    p.add_argument("-o", "--output", required=True, metavar="STORE", help="the store to merge into (made if missing)")


def run(args, out) -> int:
    m = merge(args.shards, args.output)
    for warning in m.apart:
        out.print(f"warning: {warning}", highlight=False, markup=False)
    out.print(f"merged {len(args.shards)} store(s) into {args.output}: {', '.join(dict.fromkeys(m.experiments))}; "
              f"{m.added} run(s) added, {m.replaced} replaced by a later attempt, {m.kept} already there, "
              f"{m.failures} failure(s) copied", highlight=False, markup=False)
    return 0
