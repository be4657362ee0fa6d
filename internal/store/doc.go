// Package store is the run store: every run a coordinator ran (its plan,
// agents, tags, note, search ID, result and merged intervals), kept in a
// bbolt database (go.etcd.io/bbolt: one file, copy-on-write B+tree pages,
// each transaction fsynced, so a crash or kill -9 leaves the last committed
// state) under a data directory, and the .phx file that carries one run
// (export, import).
//
// Layout of DIR/runs.db (schema SchemaVersion):
//
//	meta        "schema" -> the schema version, decimal ASCII
//	runs        run ID -> StoredRun (protobuf; intervals left out)
//	intervals   run ID -> bucket: interval index (4 bytes, big endian) -> Progress (protobuf)
//
// The store owns the layout, its versions and the file format; the
// coordinator decides what to record and when (internal to the coordinator
// package), and coordctl how to show it.
package store
