"""Views: the results database's records turned into the frozen view model every output renders.

Owns reading a campaign for display (`load`, `display_bins`, `telemetry_series`), the view
model's records (`model`), building it once (`build.build_view`: cells, intervals, comparisons
against the baseline, step scans, advice), the step scans (`steps`), the `compare` command's
views (`compare`, `compare_series`), capacity searches and their tables (`capacity`,
`capacity_tables`), the terminal summary (`summary`) and the text every output
shares (`text`, `labels`, `metrics`). It may import `analysis`, `store`, `errors`, `plan`,
`redaction`, `jsontext` and `telemetry`'s units; never `report.render`.
"""
