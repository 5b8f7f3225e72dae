//! The static token file (`--token-auth-file`): CSV lines
//! `token,user,uid[,"group1,group2"]`, extra columns ignored.

use std::collections::HashMap;
use std::path::Path;

use super::{Error, UserInfo};

/// Tokens and the users they authenticate as.
#[derive(Clone, Debug, Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io(path.to_path_buf(), e))?;
        Self::parse(&text, path)
    }

    /// Parses the file's text; `path` is for error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        let mut users = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let fields = csv_fields(line).map_err(|message| Error::TokenFile {
                path: path.to_path_buf(),
                line: n + 1,
                message,
            })?;
            if fields.len() < 3 {
                return Err(Error::TokenFile {
                    path: path.to_path_buf(),
                    line: n + 1,
                    message: format!(
                        "must have at least 3 columns (token, user name, user uid), found {}",
                        fields.len()
                    ),
                });
            }
            let token = fields[0].trim();
            if token.is_empty() {
                continue;
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            users.insert(
                token.to_string(),
                UserInfo {
                    name: fields[1].clone(),
                    uid: fields[2].clone(),
                    groups,
                    ..Default::default()
                },
            );
        }
        Ok(TokenFile { users })
    }

    /// The user `token` authenticates as.
    pub fn lookup(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }
}

/// Splits one CSV record: fields separated by commas, optionally quoted
/// with `"` (a doubled `""` inside quotes is a literal quote); leading
/// spaces of a field are trimmed.
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("unterminated quoted field".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(c) => return Err(format!("unexpected {c:?} after a quoted field")),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_format() {
        let f = TokenFile::parse(
            "abc,alice,u1,\"g1,g2\"\n\n  def, bob ,u2\n,skipped,u3\n",
            Path::new("t.csv"),
        )
        .unwrap_or_default();
        let alice = f.lookup("abc").cloned().unwrap_or_default();
        assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "u1"));
        assert_eq!(alice.groups, ["g1", "g2"]);
        let bob = f.lookup("def").cloned().unwrap_or_default();
        assert_eq!(bob.name, "bob ");
        assert!(bob.groups.is_empty());
        assert!(f.lookup("").is_none());
        assert!(TokenFile::parse("a,b\n", Path::new("t.csv")).is_err());
        assert!(TokenFile::parse("a,b,\"c\n", Path::new("t.csv")).is_err());
    }
}
