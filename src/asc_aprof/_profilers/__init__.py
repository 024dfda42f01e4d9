"""The profilers: the per-call protocol, the sync and async faces, bench and tune."""
