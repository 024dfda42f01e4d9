"""Pure data and errors: records, enums, counters, the toolkit record, defaults."""
