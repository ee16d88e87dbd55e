// SCRATCH: replaced by the proxyrun branch.
#![allow(missing_docs)]
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::{Decision, Proxy};

#[derive(Clone, Debug)]
pub struct Run {
    http: SocketAddr,
    socks: SocketAddr,
    log: Arc<std::sync::Mutex<Vec<Decision>>>,
}

impl Run {
    pub fn http_addr(&self) -> SocketAddr {
        self.http
    }
    pub fn socks_addr(&self) -> SocketAddr {
        self.socks
    }
    pub fn decisions(&self) -> Vec<Decision> {
        self.log.lock().unwrap().clone()
    }
    pub fn end(&self) {}
}

impl Proxy {
    pub fn serve_run(
        &self,
        http: TcpListener,
        socks: TcpListener,
        _until: Option<OwnedFd>,
    ) -> io::Result<Run> {
        let h = self.serve_http(http)?;
        let s = self.serve_socks5(socks)?;
        Ok(Run {
            http: h,
            socks: s,
            log: Arc::default(),
        })
    }
}
