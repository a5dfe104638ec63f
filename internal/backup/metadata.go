package backup

import (
	"encoding/json"
	"fmt"
	"time"
)

// Metadata is what a backup is: written beside the snapshot as backup.json
// once the snapshot is in the store, and printed by the agent as its pod's
// termination message, which the operator reads into the RedisBackup's
// status. A restore reads it to find and check the snapshot.
type Metadata struct {
	// Backup, Instance and Namespace name the RedisBackup and its
	// RedisPersistence.
	Backup    string `json:"backup"`
	Instance  string `json:"instance"`
	Namespace string `json:"namespace,omitempty"`
	// Mode is the instance's spec.mode.
	Mode string `json:"mode,omitempty"`
	// SourcePod is the server the snapshot came from, and Role its role
	// then (master or slave, as INFO says).
	SourcePod string `json:"sourcePod,omitempty"`
	Role      string `json:"role,omitempty"`
	// ServerVersion is the source's valkey_version.
	ServerVersion string `json:"serverVersion,omitempty"`
	// Point is when the snapshot is consistent: the server forked for it.
	Point time.Time `json:"point"`
	// StartedAt and CompletedAt bound the agent's work.
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// Location is the snapshot's URL, s3://<bucket>/<key>.
	Location string `json:"location"`
	// Size and SHA256 are the snapshot's, as stored.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Compression is how the stored snapshot is compressed ("" for not at
	// all), and RDBSize the size of the RDB in it.
	Compression string `json:"compression,omitempty"`
	RDBSize     int64  `json:"rdbSize,omitempty"`
	// ReplID and ReplOffset are the source's replication position at the
	// point.
	ReplID     string `json:"replID,omitempty"`
	ReplOffset int64  `json:"replOffset,omitempty"`
	// Keyspace is what the RDB holds, read from it as it streamed: the keys
	// of each database and a sample of them (Take.SampleKeys), for a
	// verification to compare a restore with. Absent from backups taken
	// before it was recorded, and from one whose RDB the agent could not
	// read (KeyspaceError says why). The termination message carries the
	// counts only: the sample is in backup.json.
	Keyspace      *Keyspace `json:"keyspace,omitempty"`
	KeyspaceError string    `json:"keyspaceError,omitempty"`
}

// terminationMessageLimit is what the kubelet keeps of a termination
// message.
const terminationMessageLimit = 4096

// Encode is m as the agent prints it, for the operator: without the
// keyspace's sample, which only backup.json holds (EncodeWhole).
func (m Metadata) Encode() ([]byte, error) {
	if m.Keyspace != nil {
		ks := *m.Keyspace
		ks.Sample = nil
		m.Keyspace = &ks
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > terminationMessageLimit && m.Keyspace != nil {
		// Keys in a great many databases: the counts stay in backup.json.
		m.Keyspace = nil
		return m.Encode()
	}
	if len(b) > terminationMessageLimit {
		return nil, fmt.Errorf("the backup's metadata is %d bytes, more than a termination message holds (%d)", len(b), terminationMessageLimit)
	}
	return b, nil
}

// DecodeMetadata parses what Encode wrote and checks it names a snapshot.
func DecodeMetadata(b []byte) (Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return Metadata{}, fmt.Errorf("the backup agent's result is no backup metadata: %w", err)
	}
	if m.Location == "" || m.SHA256 == "" || m.Size <= 0 {
		return Metadata{}, fmt.Errorf("the backup agent's result lacks the snapshot's location, size or SHA-256: %s", b)
	}
	return m, nil
}

// EncodeWhole is m as backup.json holds it.
func (m Metadata) EncodeWhole() ([]byte, error) { return json.Marshal(m) }
