"""Reports: readable tables, JSON and HTML."""
