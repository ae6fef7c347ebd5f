//! What blocks carry beside the conversation's text, as [`validate`](super::validate) checks
//! it: inline base64 image data (every format) and Anthropic `cache_control` breakpoints.

use super::Checker;
use crate::conversation::{Block, ToolResultContent};
use crate::guard::cache;
use crate::guard::violation::{Violation, ViolationKind};
use crate::tokens::image::image_data_fault;

impl<'a> Checker<'a> {
    /// Inline base64 images, at the top level of a message and inside tool results. A
    /// continuation reports its prefix's too, as the junction found them: the violations are
    /// the ones [`validate`](super::validate) finds in the whole.
    pub(super) fn images(&mut self) {
        if let Some(seed) = self.seed {
            self.out.extend(seed.bad_images.iter().cloned());
        }
        let mut found = Vec::new();
        for (i, j, b) in self.new_blocks() {
            match b {
                Block::ToolResult(r) => {
                    if let Some(ToolResultContent::Blocks(bs)) = &r.content {
                        for (k, nb) in bs.iter().enumerate() {
                            if let Block::Image(v) = nb
                                && let Some(reason) = image_data_fault(v)
                            {
                                found.push((i, j, Some(k), reason));
                            }
                        }
                    }
                }
                Block::Image(v) => {
                    if let Some(reason) = image_data_fault(v) {
                        found.push((i, j, None, reason));
                    }
                }
                _ => {}
            }
        }
        for (i, j, nested, reason) in found {
            let v = Violation {
                path: crate::format::image_path(self.format, self.conv, i, j, nested),
                message: Some(i),
                block: Some(j),
                kind: ViolationKind::BadImage { reason, nested },
                rule: ViolationKind::BadImage { reason, nested }.rule_id(self.format),
            };
            self.bad_images.push(v.clone());
            self.out.push(v);
        }
    }

    /// Anthropic `cache_control` breakpoints (see [`cache`]).
    pub(super) fn breakpoints(&mut self) {
        // One scan: the sites counted are the ones checked for an empty text block.
        let (earlier, sites) = match self.seed {
            None => (0, cache::sites(self.conv)),
            Some(j) => (j.breakpoints, cache::sites_from(self.conv, self.from)),
        };
        let found = earlier + sites.len();
        self.breakpoints = found;
        if found > cache::MAX_BREAKPOINTS {
            self.push(None, None, ViolationKind::TooManyCacheBreakpoints { found });
        }
        let empty = sites.into_iter().filter(|s| cache::on_empty(self.conv, s));
        for site in empty {
            match site {
                cache::Site::Block { message, block, .. } => {
                    self.push(
                        Some(message),
                        Some(block),
                        ViolationKind::CacheControlOnEmptyText,
                    );
                }
                _ => self.push(None, None, ViolationKind::CacheControlOnEmptyText),
            }
        }
    }
}
