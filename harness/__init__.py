"""The controller: CLI, run lifecycle, configuration, results store, campaigns and reports."""
