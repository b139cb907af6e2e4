"""Serve a WSGI app with bjoern (libev, one process, the app on the event loop's thread), which has
no command line of its own.

``python -m arena.servers.bjoern_main --host H --port P module:attr``
"""

import bjoern

from arena.servers.app_main import host_port_app


def main() -> None:
    host, port, app = host_port_app("arena.servers.bjoern_main")
    try:
        bjoern.run(app, host, port)  # SIGINT ends its loop (bjoern's own handler)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
