"""The names of the files in a run directory: one definition for whoever writes or reads them.

Layout (DESIGN.md): test.json, history.jsonl, results.json, report.html, harness.log, drain.json,
cluster-state.json, outcome.json, nodes/<node>/{logs,data}/. The harness writes the run directory,
the checkers read it, so the names live below both.
"""

from __future__ import annotations

TEST_JSON = "test.json"
HISTORY = "history.jsonl"
RESULTS = "results.json"
# What the report shows besides the verdict, written by the checker beside results.json
# (checkers/evidence.py): the timeline, the history lines the examples name, the replicas' pictures.
EVIDENCE = "evidence.json"
REPORT = "report.html"
REPORT_PNG = "report.png"
HARNESS_LOG = "harness.log"
DRAIN = "drain.json"
CLUSTER_STATE = "cluster-state.json"
NODES = "nodes"
# In nodes/: written by the cluster for a system whose data dirs are not Kafka segments (a defined
# system's data_format): the replica-log checks are then not available, the history decides alone.
REPLICAS_UNAVAILABLE = "replicas-unavailable.txt"
# In nodes/: the APIs (key -> [min, max] version) one broker listed in ApiVersions after the run:
# what the system implements, so the checkers can say which feature the test asked for it lacks.
API_VERSIONS = "api-versions.json"
OUTCOME = "outcome.json"  # how the run itself ended (completed, interrupted, failed) and why

# A campaign directory (<store>/campaigns/<name>/<time>/): written by the campaign, read by the
# store and by `serve`.
CAMPAIGN_SUMMARY = "summary.json"
CAMPAIGN_PAGE = "index.html"

# The store's analysis (<store>/analysis/): written by `strandline analyze`, linked by `serve`.
ANALYSIS = "analysis"
ANALYSIS_PAGE = "index.html"
