"""arena.model: what a configuration will do, from queueing theory, checked against measurements.
Pure code (numbers and stored runs in, numbers out; no I/O), references in each module.

- queueing.py: exact Mean Value Analysis with load-dependent stations, birth-death chains, Erlang B/C,
  M/M/c and Allen-Cunneen's G/G/c with waiting-time percentiles, the incomplete gamma function;
- server.py: an app server (processes x threads on cores, a GIL per process, I/O, the accept queue)
  as a flow-equivalent server, closed and open load, mean and percentile latency, what binds;
- usl.py: the Universal Scalability Law fitted with confidence intervals, and its peak;
- calibrate.py: the model's parameters from stored runs, with their uncertainty;
- verify.py: predicted against measured for every configuration of an experiment (MAPE);
- recommend.py: the best processes x threads under a p99 target and a memory budget.
- sim.py: a discrete-event simulator of fleets behind a balancer's policy (random, round robin,
  least connections, power of two, a central queue), with replications and confidence intervals.
"""
