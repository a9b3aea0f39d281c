# k-means clustering (Lloyd's algorithm) with a fixed number of iterations.
# The initial centroids are gathered with an integer-array index, distances come from broadcasting,
# each centroid is updated by an indexed assignment inside a loop over the clusters, and a run-time
# `if` keeps the old centroid of a cluster that lost all its points. Every shape is static.

const ITERS: i32 = 10

def sq_distances(x: f32[n, d], c: f32[k, d]) -> f32[n, k]:
    diff = expand_dims(x, 1) - expand_dims(c, 0)
    return sum(diff * diff, axis=2)

def assign(x: f32[n, d], c: f32[k, d]) -> i32[n]:
    return argmin(sq_distances(x, c), axis=1)

def update(x: f32[n, d], labels: i32[n], c: f32[k, d]) -> f32[k, d]:
    new = c
    for j in range(k):
        member = expand_dims(labels == j, 1)
        count = sum(where(member, 1.0, 0.0))
        if count > 0.0:
            new[j, :] = sum(where(member, x, 0.0), axis=0) / count
    return new

def kmeans(x: f32[n, d], init: i32[k], iters: i32) -> (f32[k, d], i32[n], f32):
    c = x[init]
    for it in range(iters):
        c = update(x, assign(x, c), c)
    labels = assign(x, c)
    inertia = sum(min(sq_distances(x, c), axis=1))
    return c, labels, inertia

def main() -> (f32[3, 2], i32[12], f32):
    points = [[0.0, 0.1], [0.2, -0.1], [-0.1, 0.0], [0.1, 0.2],
              [5.0, 5.1], [5.2, 4.9], [4.8, 5.0], [5.1, 5.2],
              [0.1, 5.0], [-0.2, 4.8], [0.0, 5.3], [0.2, 5.1]]
    # a poor start: two seeds in the same blob, none in the third
    centroids, labels, inertia = kmeans(points, [0, 1, 4], ITERS)
    print("k-means: inertia", inertia)
    return centroids, labels, inertia
