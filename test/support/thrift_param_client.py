# A parameter-service client written with Apache Thrift's own Python
# library (Debian's python3-thrift), code generated from thrift/param.thrift
# by the stock compiler: nothing of shoal's on the client side, so
# test_rpc's /rpc/python-client checks that shoal's server speaks plain
# Thrift to a client that frames, buffers and writes its bytes its own way
# (the pure-Python protocol and the C-accelerated one).
#
# Run by test/test_rpc.c, which starts the server and says what it holds:
#   thrift_param_client.py GEN_DIR PORT TOKEN BEGIN:LEN [BEGIN:LEN ...]
# one BEGIN:LEN per slice (float offsets in the flat param buffer).  The
# server is SYNC with one contributor and plain SGD at lr 0.5, its values
# start as value_pattern (seed 0); every expected value is a multiple of
# 0.5 below 1024, exact in float32 and in float16.  Exits 0 when every
# check held, else prints what differed and exits 1.
import struct
import sys

sys.path.insert(0, sys.argv[1])

from param import ParamService  # noqa: E402  (generated into GEN_DIR)
from param.ttypes import ParamError, ParamFault  # noqa: E402
from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

LR = 0.5
FP32, FP16 = 0, 1  # codecs (thrift/param.thrift)
port, token = int(sys.argv[2]), sys.argv[3]
slices = [tuple(int(x) for x in arg.split(":")) for arg in sys.argv[4:]]


def start_value(i):
    return float((i * 7) % 2001 - 1000)


def grad_value(i, step):
    return float((i * 3 + step) % 7 - 3)


def pack(values, fmt="f"):
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def unpack(data, fmt="f"):
    size = struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (len(data) // size, fmt), data))


def check(what, got, want):
    if got != want:
        if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
            i = next(k for k in range(len(got)) if got[k] != want[k])
            sys.exit("%s: value %d is %r, expected %r" % (what, i, got[i], want[i]))
        sys.exit("%s: got %r, expected %r" % (what, got, want))


def expect_fault(what, fault, call, *args):
    try:
        call(*args)
    except ParamError as e:
        check(what + " (fault code)", e.code, fault)
        return
    sys.exit("%s: no ParamError, expected fault %d" % (what, fault))


def connect(protocol_class):
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(20000)
    transport = TTransport.TBufferedTransport(sock)
    client = ParamService.Client(protocol_class(transport))
    transport.open()
    return transport, client


# current values per slice, as the server should hold them
values = {s: [start_value(b + i) for i in range(n)] for s, (b, n) in enumerate(slices)}

# The generated Python methods take every argument, defaults included
# (base_version -1, unit -1, codecs fp32).

# Step 0 with the pure-Python protocol: pull, then push_pull.
transport, client = connect(TBinaryProtocol.TBinaryProtocol)
for s, (b, n) in enumerate(slices):
    reply = client.pull(token, s, 0, 5000, FP32)
    check("slice %d: version before any push" % s, reply.version, 0)
    check("slice %d: start values" % s, unpack(reply.values), values[s])
    grad = [grad_value(b + i, 0) for i in range(n)]
    values[s] = [v - LR * g for v, g in zip(values[s], grad)]
    reply = client.push_pull(token, s, 0, pack(grad), 5000, -1, -1, FP32, FP32)
    check("slice %d: push_pull version" % s, reply.version, 1)
    check("slice %d: push_pull values" % s, unpack(reply.values), values[s])
transport.close()

# Step 1 with the C-accelerated protocol: push, pull the next version,
# pull again as float16, then what the server must refuse.
transport, client = connect(TBinaryProtocol.TBinaryProtocolAccelerated)
for s, (b, n) in enumerate(slices):
    grad = [grad_value(b + i, 1) for i in range(n)]
    values[s] = [v - LR * g for v, g in zip(values[s], grad)]
    client.push(token, s, 1, pack(grad), -1, -1, FP32)
    reply = client.pull(token, s, 2, 5000, FP32)
    check("slice %d: version after push" % s, reply.version, 2)
    check("slice %d: values after push" % s, unpack(reply.values), values[s])
    reply = client.pull(token, s, 2, 5000, FP16)
    check("slice %d: float16 values" % s, unpack(reply.values, "e"), values[s])

b, n = slices[0]
expect_fault("wrong token", ParamFault.BAD_TOKEN, client.pull, token + "x", 0, 0, 0, FP32)
expect_fault("slice past the last", ParamFault.UNKNOWN_SLICE, client.pull, token, len(slices), 0, 0, FP32)
expect_fault("gradient one float short", ParamFault.BAD_LENGTH,
             client.push, token, 0, 2, pack([0.0] * (n - 1)), -1, -1, FP32)
expect_fault("version never reached", ParamFault.TIMEOUT, client.pull, token, 0, 99, 100, FP32)
# the connection is still good after every refusal
check("values after the refusals", unpack(client.pull(token, 0, 2, 5000, FP32).values), values[0])

stats = client.stats(token)
check("pushes counted", stats.pushes, 2 * len(slices))
transport.close()
print("python-client: %d slices, %d floats: every check held"
      % (len(slices), sum(n for _, n in slices)))
