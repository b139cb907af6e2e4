"""``arena reap``: find and remove what dead Arena processes left (servers, groups, dirs)."""

from arena.app.reap import reap_stale

NAME = "reap"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="stop and remove what dead Arena processes left: server processes, cgroups, "
                                  "work dirs, load generators' temp dirs (failed starts' logs after a week)")
    p.add_argument("--logs", action="store_true", help="also remove every kept log of a failed start now")


def run(args, out) -> int:
    found = reap_stale(args.logs)
    for item in found:
        out.print(f"reaped {item}", highlight=False, markup=False)
    out.print(f"{len(found)} leftovers of dead Arena processes removed" if found else "nothing left by dead Arena "
              "processes", highlight=False)
    return 0
