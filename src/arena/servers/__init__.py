"""Real servers: the catalog of entries, their lifecycle, and the cgroups that confine them."""
