"""Arena: which app server and how many processes x threads serve a workload best, and why."""
