"""The pprof profile schema (``profile.proto``) and its generated protobuf module, imported
only when a pprof profile is read (the protobuf runtime is not loaded otherwise)."""
