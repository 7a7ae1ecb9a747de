"""``pods/exec`` and ``pods/attach``: a remote command session, and the transports that carry it.

kube-apiserver upgrades these requests (WebSocket ``v5.channel.k8s.io`` first, SPDY/3.1 as the
fallback) and streams to the kubelet, which streams to the container runtime. Here:

* ``options``: the request's query (``PodExecOptions``, ``PodAttachOptions``), the container chosen
  as kube-apiserver chooses it, and the ``Status`` documents the error channel carries (pure);
* ``session``: the transport-independent session: stdin in, stdout and stderr out, resize, one
  outcome (exit code or failure). ``ExecSession`` reaches the pod through the node's exec socket
  (``Layout.exec_socket``, as kube-apiserver reaches the kubelet); ``AttachSession`` follows the
  container's log and writes to its stdin FIFO;
* ``websocket``: the channel framing of ``k8s.io/apimachinery``'s ``wsstream`` (``v5``, ``v4``,
  ``channel``/``base64.channel``) over aiohttp's WebSocket, driving a session;
* ``spdystreams``: the kubelet's SPDY/3.1 streams (``error``, ``stdin``, ``stdout``, ``stderr``,
  ``resize``; protocols ``v5.channel.k8s.io`` .. ``channel.k8s.io``) over ``tunnels.spdy``, driving a session;
* ``serving``: what the API server calls for a connect request: checks, then a session over the
  transport the client asked for.
"""
