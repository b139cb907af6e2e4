"""``arena import``: runs kept in a rescue file (a store that could not be written) into a store."""

from arena.app.storage import import_rescued
from arena.cli.args import add_store

NAME = "import"


def add(sub) -> None:
    p = sub.add_parser(NAME, help="bring runs kept in a rescue file (the store could not be written) into the store")
    p.add_argument("file", help="the file the failed write named (STORE.rescued-....json)")
    add_store(p)


def run(args, out) -> int:
    name, added, already = import_rescued(args.file, args.store)
    out.print(f"{name}: {added} brought into {args.store}, {already} already there; "
              f"the file {args.file} can be removed", highlight=False, markup=False)
    return 0
