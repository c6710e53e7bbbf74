/* The parameter service: workers (and other server groups) talk to the
 * ShoalServer of a server process through these calls.
 *
 * Floats travel as `binary` holding little-endian float32 values (a
 * memcpy on every machine shoal runs on), never as list<double>: one
 * virtual call per element made that ~100x slower.  Every call carries
 * the job token as its first argument; a call with a wrong token gets
 * ParamError BAD_TOKEN.  A slice's data must always be the whole slice.
 *
 * send_bridge carries messages between the processes of a worker group
 * spread over processes (src/comm/group_wire.c); they are pushed to the
 * receiver, so there is no call to fetch them.  Struct names starting
 * Bridge and ParamFault values 100..199 stay reserved for bridge data.
 * New calls keep argument 1 the token.
 *
 * Codecs (src/core/codec.h; [cluster] wire_grads, wire_values): grad_codec
 * says how a gradient's bytes encode its floats, values_codec how the
 * reply's values should (0 fp32, 1 fp16, 2 bf16, 3 2bit, 4 1bit; values
 * take 0-2).  A slice's data must hold exactly the codec's bytes for the
 * slice.  Old clients send neither: fp32.
 * Names avoid clashes with shoal's C types: ErrorCode and ServerStats
 * would generate ShoalErrorCode and ShoalServerStats. */
namespace c_glib Shoal

enum ParamFault {
  BAD_TOKEN = 1,       /* the job token did not match */
  UNKNOWN_SLICE = 2,   /* slice id out of range or not hosted by this process */
  BAD_LENGTH = 3,      /* data is not exactly the slice's length in float32 */
  REFUSED = 4,         /* the server refused the call: SYNC step out of turn, server stopping */
  TIMEOUT = 5,         /* a pull waited longer than its wait_ms for min_version */
  STOPPED = 6,         /* SYNC: the job stops at step stop_step (a worker stopped there, see
                        * stop_at): a push of that step or a later one, or a pull waiting for
                        * a version beyond it, is never served */
  LOST = 7,            /* heartbeat: the receiver declared the sender lost and dropped it */
  FAILED = 8,          /* the receiving process stops the job (a rank it needs was lost):
                        * the message says why; every later call gets the same */
  STOPPING = 9,        /* heartbeat: the receiving process was sent a stop signal (SIGINT,
                        * SIGTERM) itself: the sender's workers stop at their next step with
                        * a checkpoint, as on their own signal (no launcher may be there to
                        * pass the stop on: mpirun, srun) */
  /* next free: 10; 100..199 reserved for bridge data */
}

/* Next free field id: 4 */
exception ParamError {
  1: ParamFault code,
  2: string message,
  3: i64 stop_step,    /* STOPPED: the step the job stops at */
}

/* A slice's values and the version they belong to.
 * Next free field id: 3 */
struct SliceValues {
  1: i64 version,
  2: binary values,
}

/* Counters since the server started (ShoalServerStats).
 * Next free field id: 8 */
struct StatsReply {
  1: i64 pushes,
  2: i64 pulls,
  3: i64 updates,
  4: i64 deltas,
  5: i64 bytes_in,
  6: i64 bytes_out,
  7: i64 dropped,      /* SYNC with backup workers: late gradients dropped */
}

service ParamService {
  /* A gradient of the whole slice for 0-based step (shoal_server_push_from).
   * base_version: the slice's version the gradient was computed on (the
   * version of the values the worker last received), from which the
   * server records the update's staleness; -1 (an older client): not
   * recorded.  unit: the pushing unit (its worker group, or group *
   * nworkers_per_group + worker where a group's workers push each their
   * own gradient), whose step the server counts for SSP; -1: none.
   * Under SSP ([cluster] staleness) the call returns once the slowest
   * unit is close enough (see push_pull). */
  void push (1: string token, 2: i32 slice, 3: i64 step, 4: binary grad,
             5: i64 base_version = -1, 6: i32 unit = -1, 7: i32 grad_codec = 0)
    throws (1: ParamError err),

  /* Waits until the slice's version >= min_version, at most wait_ms
   * (then TIMEOUT), and returns the values. */
  SliceValues pull (1: string token, 2: i32 slice, 3: i64 min_version, 4: i64 wait_ms,
                    5: i32 values_codec = 0)
    throws (1: ParamError err),

  /* push, then pull the first version that includes this gradient: the
   * next version in SYNC mode, the current one in ASYNC mode.  A SYNC
   * gradient that came too late for its step (backup workers: the step
   * was applied with the first k - b gradients) is dropped and the reply
   * holds the current values at once; the worker goes on at their
   * version.  Under SSP ([cluster] staleness = s) the reply waits until
   * every unit has pushed step - s. */
  SliceValues push_pull (1: string token, 2: i32 slice, 3: i64 step, 4: binary grad,
                         5: i64 wait_ms, 6: i64 base_version = -1, 7: i32 unit = -1,
                         8: i32 grad_codec = 0, 9: i32 values_codec = 0)
    throws (1: ParamError err),

  /* Replaces values and version (initial values, restored checkpoints). */
  void put (1: string token, 2: i32 slice, 3: i64 version, 4: binary values)
    throws (1: ParamError err),

  /* Hogwild, master side: values += delta; returns the new values. */
  binary apply_delta (1: string token, 2: i32 slice, 3: binary delta)
    throws (1: ParamError err),

  /* Hogwild with elastic averaging (EASGD, Zhang, Choromanska, LeCun
   * 2015), master side: with the slice's center c and a group's replica
   * x = values, d = alpha (x - c), c += d; returns d, which the group
   * subtracts from its replica.  0 < alpha <= 1.  REFUSED where the
   * slice keeps no center (a server not run with hogwild_sync = elastic).
   * Added after apply_delta: an older server answers it with an unknown
   * method error, never with a wrong rule. */
  binary elastic_exchange (1: string token, 2: i32 slice, 3: binary values, 4: double alpha)
    throws (1: ParamError err),

  StatsReply stats (1: string token)
    throws (1: ParamError err),

  /* Worker process `rank` is done (shoal_rpc_server_wait counts these). */
  void shutdown (1: string token, 2: i32 rank)
    throws (1: ParamError err),

  /* Saves the served slices as they are at `step` into this process's
   * checkpoint store (shoal_server_checkpoint; once per step). */
  void checkpoint (1: string token, 2: i64 step)
    throws (1: ParamError err),

  /* SYNC: a worker stops at `step` (SIGINT/SIGTERM) and will not push
   * it.  From now on this server refuses with STOPPED every push of that
   * step or a later one and every pull (waiting ones included) for a
   * version beyond it, so that workers of the group in other processes
   * that went on into `step` stop there too.  Where several stop steps
   * come, the lowest holds.  With backup workers the other workers may
   * have completed `step` (or later ones) without the caller: the stop
   * then falls at the first step no slice here has applied.  Returns the
   * step this server stops at (what the caller checkpoints as), the
   * caller's own step where nothing stops (ASYNC mode). */
  i64 stop_at (1: string token, 2: i64 step)
    throws (1: ParamError err),

  /* Shared memory for a worker on this server's host (src/rpc/shm_region.h):
   * the caller offers its sealed region (pid, fd, bytes, nonce, host: its
   * boot id), whose data holds its param values at float offset
   * values_at and its gradients at float offset grads_at, both in the
   * job's flat layout.  From then on push_pull_shm on this connection
   * moves slices through it; the connection's end detaches it.  REFUSED
   * (the caller stays on the socket) where the region cannot be opened
   * from here or fails a check: another host, another PID namespace, a
   * region too small, unsealed or not the one offered. */
  void attach_shm (1: string token, 2: i32 pid, 3: i32 fd, 4: i64 bytes, 5: binary nonce,
                   6: string host, 7: i64 values_at, 8: i64 grads_at)
    throws (1: ParamError err),

  /* push_pull (or, fetch false, push) of several slices with their
   * gradients read from the attached region and their values written
   * into it, in one round trip: every push first, then the values.
   * slices: count little-endian i32, each once; base_versions: count
   * little-endian i64, as push_pull's base_version.  Returns the versions
   * of the values written (count little-endian i64; with fetch false, the
   * versions the pushes made ready).  clear_grads: the server leaves the
   * slices' gradients in the region zero (cleared in the pass that reads
   * them), whatever became of them, once the call returns without an
   * error; the caller need not clear them before its next backward. */
  binary push_pull_shm (1: string token, 2: binary slices, 3: i64 step, 4: i64 wait_ms,
                        5: binary base_versions, 6: i32 unit, 7: bool fetch, 8: bool clear_grads)
    throws (1: ParamError err),

  /* Liveness (src/server/liveness.h): process `rank` is alive.
   * incarnation: a number fixed for the life of the sending process (a
   * restarted rank sends another); progress: its steps and test batches
   * so far, -1 while none of its units trains; rejoin: a restarted rank
   * that joins the running job (shoal proc --rejoin).  Returns the ranks
   * this process holds lost, as int32 little-endian, so that every
   * process comes to the same view.  LOST when the receiver declared
   * the sender lost and this is not a rejoin of a new incarnation.
   * Processes send this every [cluster] heartbeat_interval to every
   * rank that takes calls. */
  binary heartbeat (1: string token, 2: i32 rank, 3: i64 incarnation, 4: i64 progress,
                    5: bool rejoin)
    throws (1: ParamError err),

  /* A message for this process's mailbox under (group, channel); returns
   * once it is queued there, not once it is taken.  REFUSED where the
   * process takes no bridge messages. */
  void send_bridge (1: string token, 2: i32 group, 3: i32 channel, 4: binary data)
    throws (1: ParamError err),
}
