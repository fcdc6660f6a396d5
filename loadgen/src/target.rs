//! A measured target: a name and the servers of its ensemble.

use std::fmt;

#[derive(Clone, Debug, serde::Serialize)]
pub struct Target {
    pub name: String,
    pub servers: Vec<String>,
}

impl Target {
    /// `name=host:port,host:port` or `host:port,...` (named after itself).
    pub fn parse(spec: &str) -> Result<Target, String> {
        let (name, list) = match spec.split_once('=') {
            Some((n, l)) => (n.trim().to_string(), l),
            None => (spec.to_string(), spec),
        };
        let servers: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if name.is_empty() || servers.is_empty() {
            return Err(format!(
                "bad target {spec:?}: want name=host:port[,host:port...]"
            ));
        }
        for s in &servers {
            if s.rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_none()
            {
                return Err(format!("bad server address {s:?} in target {spec:?}"));
            }
        }
        Ok(Target { name, servers })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_named_and_bare_targets() {
        let t = Target::parse("rk=127.0.0.1:2181,127.0.0.1:2182").unwrap();
        assert_eq!(t.name, "rk");
        assert_eq!(t.servers.len(), 2);
        let t = Target::parse("localhost:2181").unwrap();
        assert_eq!(t.name, "localhost:2181");
        assert!(Target::parse("zk=").is_err());
        assert!(Target::parse("zk=host").is_err());
    }
}
