"""Consumer groups: the coordinator's state machine (`coordinator`) and the broker's group APIs (`service`)."""
