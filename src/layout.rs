//! States sorted by Gaussian count and packed into padded blocks of states
//! (64 by default, after Vaněk et al.): virtual Gaussians carry log-weight −∞,
//! an offset vector locates each block, and a map leads back to the original
//! state order.
