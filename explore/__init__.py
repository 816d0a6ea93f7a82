"""`strandline explore`: a deterministic simulation of the own broker that searches fault schedules
for a data loss and shrinks the first it finds (docs/explore.md).

- `settings`: what a simulated test runs with; `schedule`: fault schedules, their story, and the
  nemesis's scripted-schedule format; `log`: the simulated replica log; `simulation`: the cluster
  on the broker's own sans-IO core; `search`: the seeded search and the shrinking; `bench`: figures.
"""
