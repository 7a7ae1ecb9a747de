"""SPDY/3.1, the multiplexing protocol kubectl still speaks for port-forward and exec.

kube-apiserver and the kubelet carry ``pods/portforward``, ``pods/exec`` and ``pods/attach`` over
SPDY/3.1 streams (moby/spdystream underneath k8s.io/apimachinery's httpstream), either on the
upgraded HTTP connection itself or, since kubectl 1.31, tunnelled inside WebSocket binary
messages. ``frames`` encodes and decodes the frames (pure, no I/O), ``headerblock`` the
zlib-compressed name/value blocks with the SPDY/3 dictionary (``dictionary``), ``session`` runs
the streams of one connection over any byte pipe.
"""
