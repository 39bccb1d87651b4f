// One page load in a new container (userContextId: its own connections and TLS session cache), run in
// Firefox's chrome context through Marionette (asynchronous script). Each HTTP channel of the container that
// stops is recorded from the parent process's own view: its timed-channel times (PRTime, µs), its local and
// remote address, its TLS group and signature scheme. Returns when the top-level document's window stops.
const [url, ucid, timeoutMs] = arguments;
const done = arguments[arguments.length - 1];
const win = Services.wm.getMostRecentWindow("navigator:browser");
const records = [];
const get = (f) => { try { return f(); } catch (e) { return null; } };
const observer = {
  observe(subject) {
    const ch = get(() => subject.QueryInterface(Ci.nsIHttpChannel));
    if (!ch || !ch.loadInfo || ch.loadInfo.originAttributes.userContextId !== ucid) return;
    const t = ch.QueryInterface(Ci.nsITimedChannel);
    const ci = ch.QueryInterface(Ci.nsIHttpChannelInternal);
    const sec = get(() => ch.securityInfo);
    records.push({
      url: ch.URI.spec, status: ch.status, http_status: get(() => ch.responseStatus),
      protocol: get(() => ch.protocolVersion), local_port: get(() => ci.localPort),
      remote: get(() => ci.remoteAddress + ":" + ci.remotePort),
      document: ch.loadInfo.externalContentPolicyType === Ci.nsIContentPolicy.TYPE_DOCUMENT,
      transfer: get(() => ch.transferSize),
      // the URL whose response named it: the referrer before its policy trimmed it (none for the page itself)
      initiator: get(() => ch.referrerInfo.originalReferrer.spec),
      t: {async_open: t.asyncOpenTime, connect_start: t.connectStartTime, tcp_connect_end: t.tcpConnectEndTime,
          secure_start: t.secureConnectionStartTime, connect_end: t.connectEndTime, request_start: t.requestStartTime,
          response_start: t.responseStartTime, response_end: t.responseEndTime},
      group: sec ? get(() => sec.keaGroupName) : null, sigalg: sec ? get(() => sec.signatureSchemeName) : null,
      tls: sec ? get(() => sec.protocolVersion) : null, error: sec ? get(() => sec.errorCodeString) : null,
    });
  },
};
Services.obs.addObserver(observer, "http-on-stop-request");
const tab = win.gBrowser.addTab(url, {userContextId: ucid,
  triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal()});
const browser = tab.linkedBrowser;
let finished = false;
const finish = (status, why) => {
  if (finished) return;
  finished = true;
  Services.obs.removeObserver(observer, "http-on-stop-request");
  browser.removeProgressListener(listener);
  const stopped = win.performance.timeOrigin + win.performance.now();  // epoch ms, the window's stop
  const page = get(() => browser.documentURI.spec);
  win.gBrowser.removeTab(tab);
  done({records, status, why, stopped_ms: stopped, page});
};
const listener = {
  onStateChange(webProgress, request, flags, status) {
    const stop = Ci.nsIWebProgressListener.STATE_STOP | Ci.nsIWebProgressListener.STATE_IS_WINDOW;
    const spec = get(() => request.QueryInterface(Ci.nsIChannel).originalURI.spec);
    if ((flags & stop) === stop && webProgress.isTopLevel && spec && spec !== "about:blank") finish(status, null);
  },
  QueryInterface: ChromeUtils.generateQI(["nsIWebProgressListener", "nsISupportsWeakReference"]),
};
browser.addProgressListener(listener, Ci.nsIWebProgress.NOTIFY_STATE_WINDOW);
win.setTimeout(() => finish(null, "timeout"), timeoutMs);
