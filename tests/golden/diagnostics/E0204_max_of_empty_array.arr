def main(x: f32[0, 3]) -> f32[3]:
    return max(x, axis=0)
