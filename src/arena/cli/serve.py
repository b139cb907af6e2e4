"""``arena serve``: one server in the foreground until Ctrl-C."""

from arena.app.servers import serve
from arena.services import KINDS
from arena.cli.args import (note_unused_environment, reap_first, warn, add_knobs, add_limits, add_settings,
                            add_user_app, assignment, count, limits_of, settings_options, topology_option,
                            user_app_options)
from arena.servers import catalog
from arena.plan.experiment import settings_text
from arena.servers.launch import ServerSpec
from arena.subjects import App
from arena.subjects.user import app_for

NAME = "serve"


def add(sub) -> None:
    s = sub.add_parser(NAME, help="run one server in the foreground (Ctrl-C stops everything)")
    s.add_argument("server", help="a server name from `arena servers`")
    add_knobs(s)
    add_limits(s)
    s.add_argument("--service", action="append", default=[], choices=KINDS, dest="services",
                   help="start this service first and point the server at it (repeatable): postgres, http")
    s.add_argument("--app", help="a built-in subject app (default: the first the server serves), or your own: "
                                 "a config.ru (or its directory) or module:callable")
    add_user_app(s)
    add_settings(s)
    s.add_argument("--topology", type=assignment("--topology"), action="append", default=[], metavar="KEY=VALUE",
                   help="put a front before it, as an experiment's [topology]: proxy=nginx, buffering=false, "
                        "balancer=haproxy, instances=4, balance=leastconn, maxconn=1, upstream=unix (repeatable)")
    s.add_argument("--port", type=count("--port", 1, 65535), help="port (default: a free one)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")


def run(args, out) -> int:
    topology = topology_option(args.topology, args.server)

    def ready(deployed) -> None:
        running = deployed.instances[0] if topology.front else deployed
        knobs = ", ".join(f"{k}={'default' if v is None else v}" for k, v in running.knobs.items()) or "no knobs"
        knobs += "".join(f", {settings_text({k: v})}" for k, v in running.settings.items())
        knobs += f", {running.spec.limits.text}" if running.spec.limits.any else ""
        out.print(f"{running.server.name} {running.version or ''} serving [bold]{running.app}[/] at "
                  f"[bold]{running.socket or running.url}[/] ({knobs}; {len(running.procset.pids())} processes; "
                  f"{running.procset.backend} {running.procset.name}; started in {running.startup_s:.2f} s)",
                  highlight=False)
        path = app.health if isinstance(app, App) else "/work?cpu_ms=20&io_ms=30&bytes=1000"
        if topology.front:
            out.print(f"{topology.text}: {deployed.front.describe()} at [bold]{deployed.url}[/] before "
                      f"{len(deployed.instances)} instance(s) ({deployed.front.procset.name}); "
                      f"its config and logs: {deployed.front.workdir}", highlight=False)
        out.print(f"log: {running.log_path}   try: curl -si '{deployed.url}{path}'", highlight=False)
        out.print("Ctrl-C stops it and everything it started.")

    app = app_for(args.app, catalog.get_server(args.server).interfaces, **user_app_options(args))
    warn(out, app)
    reap_first(out)
    note_unused_environment(out)
    spec = ServerSpec(args.server, app, args.processes, args.threads, args.connections, args.cpus,
                      args.port, args.host, limits=limits_of(args), **settings_options(args))
    stopped = serve(spec, ready, args.services,
                    lambda svc: out.print(f"service: {svc.describe()} at {svc.address}", highlight=False, markup=False),
                    topology)
    out.print(f"stopped {stopped.server}: no process left, port {stopped.port} free")
    return 0
