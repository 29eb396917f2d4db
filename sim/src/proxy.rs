//! A small TCP proxy placed in a gateway, leaf or route link so the sim can cut the link and
//! restore it, and a port that refuses every connection (where a route learned by gossip would
//! otherwise bypass the route proxies, see [`RefusingPort`]).
//!
//! Connections can be cut all at once or selectively: the first line the dialing side sends (its
//! CONNECT, which for a gateway names the dialing cluster) is matched against blocked patterns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("link proxy cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Default)]
struct State {
    all_cut: bool,
    blocked: Vec<String>,
    next_id: u64,
    conns: HashMap<u64, Conn>,
}

struct Conn {
    first_line: Option<String>,
    task: Option<AbortHandle>,
}

impl State {
    fn refused(&self, first_line: Option<&str>) -> bool {
        self.all_cut
            || first_line.is_some_and(|l| self.blocked.iter().any(|p| l.contains(p.as_str())))
    }

    /// Aborts every connection that the current rules refuse.
    fn enforce(&mut self) {
        let doomed: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| self.all_cut || self.refused(c.first_line.as_deref()))
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            if let Some(c) = self.conns.remove(&id)
                && let Some(t) = c.task
            {
                t.abort();
            }
        }
    }
}

pub struct LinkProxy {
    listen_port: u16,
    target: (String, u16),
    state: Arc<Mutex<State>>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LinkProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LinkProxy(:{} -> {}:{})",
            self.listen_port, self.target.0, self.target.1
        )
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panicking connection task cannot leave the state inconsistent: recover the guard.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl LinkProxy {
    /// A proxy that will listen on `listen_port` and forward to `target` once started.
    pub fn new(listen_port: u16, target: (String, u16)) -> Self {
        LinkProxy {
            listen_port,
            target,
            state: Arc::new(Mutex::new(State::default())),
            accept: None,
        }
    }

    pub fn listen_port(&self) -> u16 {
        self.listen_port
    }

    pub async fn start(&mut self) -> Result<(), ProxyError> {
        if self.accept.is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind(("127.0.0.1", self.listen_port))
            .await
            .map_err(|source| ProxyError::Bind {
                port: self.listen_port,
                source,
            })?;
        let state = self.state.clone();
        let target = self.target.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut st = lock(&state);
                if st.all_cut {
                    continue; // dropping `client` refuses the connection
                }
                let id = st.next_id;
                st.next_id += 1;
                st.conns.insert(
                    id,
                    Conn {
                        first_line: None,
                        task: None,
                    },
                );
                let handle = tokio::spawn(pipe(id, client, target.clone(), state.clone()));
                if let Some(c) = st.conns.get_mut(&id) {
                    c.task = Some(handle.abort_handle());
                }
            }
        }));
        Ok(())
    }

    /// Cuts every connection and refuses new ones.
    pub fn cut_all(&self) {
        let mut st = lock(&self.state);
        st.all_cut = true;
        st.enforce();
    }

    /// Accepts connections again after [`LinkProxy::cut_all`].
    pub fn restore_all(&self) {
        lock(&self.state).all_cut = false;
    }

    /// Cuts connections whose first line contains `pattern`, now and in future.
    pub fn block(&self, pattern: &str) {
        let mut st = lock(&self.state);
        if !st.blocked.iter().any(|p| p == pattern) {
            st.blocked.push(pattern.to_string());
        }
        st.enforce();
    }

    /// Lifts a [`LinkProxy::block`].
    pub fn unblock(&self, pattern: &str) {
        lock(&self.state).blocked.retain(|p| p != pattern);
    }

    /// Number of connections currently proxied.
    pub fn connections(&self) -> usize {
        lock(&self.state).conns.len()
    }
}

/// A loopback port held bound but never listening: a connection to it is refused at once
/// (ECONNREFUSED), where a proxy that is cut accepts and then closes. A route proxy topology
/// gives it to each server as its `cluster.advertise`: nats-server dials an advertised address
/// only for a route it learned by gossip (implicit), gives such a route up after a refused dial
/// (`connect_retries` 0), but would redial one that was accepted and closed, again and again.
pub struct RefusingPort {
    port: u16,
    socket: Option<tokio::net::TcpSocket>,
}

impl std::fmt::Debug for RefusingPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RefusingPort(:{})", self.port)
    }
}

impl RefusingPort {
    /// A port that will refuse connections once bound.
    pub fn new(port: u16) -> Self {
        RefusingPort { port, socket: None }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Binds the port (no listen), so nothing else takes it and every dial is refused.
    pub fn bind(&mut self) -> Result<(), ProxyError> {
        if self.socket.is_some() {
            return Ok(());
        }
        let bind_err = |source| ProxyError::Bind {
            port: self.port,
            source,
        };
        let socket = tokio::net::TcpSocket::new_v4().map_err(bind_err)?;
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], self.port)))
            .map_err(bind_err)?;
        self.socket = Some(socket);
        Ok(())
    }
}

async fn pipe(id: u64, client: TcpStream, target: (String, u16), state: Arc<Mutex<State>>) {
    if let Ok(upstream) = TcpStream::connect((target.0.as_str(), target.1)).await {
        let (mut cr, mut cw) = client.into_split();
        let (mut ur, mut uw) = upstream.into_split();
        let st = state.clone();
        let up = async move {
            let mut buf = vec![0u8; 32 * 1024];
            let mut first = Vec::new();
            let mut have_first = false;
            loop {
                let n = match cr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if !have_first {
                    first.extend_from_slice(&buf[..n]);
                    if let Some(pos) = first.iter().position(|b| *b == b'\n') {
                        have_first = true;
                        let line = String::from_utf8_lossy(&first[..pos]).to_string();
                        let mut s = lock(&st);
                        if s.refused(Some(&line)) {
                            break;
                        }
                        if let Some(c) = s.conns.get_mut(&id) {
                            c.first_line = Some(line);
                        }
                    }
                }
                if uw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        };
        let down = async move {
            let _ = tokio::io::copy(&mut ur, &mut cw).await;
        };
        tokio::select! {
            _ = up => {},
            _ = down => {},
        }
    }
    lock(&state).conns.remove(&id);
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
        }
        let mut st = lock(&self.state);
        st.all_cut = true;
        st.enforce();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> (u16, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let h = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (port, h)
    }

    async fn roundtrip(port: u16, line: &str) -> std::io::Result<String> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(line.as_bytes()).await?;
        let mut buf = vec![0u8; line.len()];
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut buf))
            .await
            .map_err(|_| std::io::Error::other("timeout"))??;
        Ok(String::from_utf8_lossy(&buf).to_string())
    }

    #[tokio::test]
    async fn forwards_cuts_and_restores() {
        let (port, _echo) = echo_server().await;
        let mut p = LinkProxy::new(crate::ports::free_port(), ("127.0.0.1".into(), port));
        p.start().await.unwrap();
        assert_eq!(
            roundtrip(p.listen_port(), "CONNECT {}\n").await.unwrap(),
            "CONNECT {}\n"
        );

        p.cut_all();
        assert!(roundtrip(p.listen_port(), "CONNECT {}\n").await.is_err());
        p.restore_all();
        assert_eq!(
            roundtrip(p.listen_port(), "PING\n").await.unwrap(),
            "PING\n"
        );

        p.block("\"gateway\":\"c2\"");
        assert!(
            roundtrip(p.listen_port(), "CONNECT {\"gateway\":\"c2\"}\n")
                .await
                .is_err()
        );
        assert!(
            roundtrip(p.listen_port(), "CONNECT {\"gateway\":\"c3\"}\n")
                .await
                .is_ok()
        );
        p.unblock("\"gateway\":\"c2\"");
        assert!(
            roundtrip(p.listen_port(), "CONNECT {\"gateway\":\"c2\"}\n")
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_refusing_port_refuses_every_dial_while_bound() {
        let mut r = RefusingPort::new(crate::ports::free_port());
        r.bind().unwrap();
        let err = TcpStream::connect(("127.0.0.1", r.port()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
        // Held: nothing else can listen on it.
        assert!(TcpListener::bind(("127.0.0.1", r.port())).await.is_err());
    }
}
