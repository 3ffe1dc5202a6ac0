"""Where tuples live: the demo data set, archived stores, and (later) live streams."""
