"""``arena reap``: find and remove what dead Arena processes left (servers, groups, dirs)."""

from arena.app.reap import reap_stale

NAME = "reap"


def add(sub) -> None:
    sub.add_parser(NAME, help="stop and remove what dead Arena processes left: server processes, cgroups, "
                              "work dirs, load generators' temp dirs")


def run(args, out) -> int:
    found = reap_stale()
    for item in found:
        out.print(f"reaped {item}", highlight=False, markup=False)
    out.print(f"{len(found)} leftovers of dead Arena processes removed" if found else "nothing left by dead Arena "
              "processes", highlight=False)
    return 0
