"""IO-free plans: the CSV parser, the raw decoders, bench, statistics, the verdict."""
