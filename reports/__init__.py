"""Report writers. Outputs go to a per-run folder under reports/runs/ (not tracked)."""
